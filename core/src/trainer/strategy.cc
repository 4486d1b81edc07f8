#include "hpu/core/trainer/strategy.h"

namespace hpu::core {

std::vector<optim::ParamSlice> Strategy::optimizerSlices(nn::FlatParameters& params) {
  std::vector<optim::ParamSlice> slices;
  for (auto& b : params.buckets())
    slices.push_back({b.valueSpan().data(), b.gradSpan().data(), b.numel, b.values->dtype()});
  return slices;
}

GradientView Strategy::gradients(nn::FlatParameters& params) {
  GradientView v;
  for (auto& b : params.buckets()) v.spans.push_back(b.gradSpan());
  return v;
}

namespace {

class SingleDeviceStrategy final : public Strategy {
 public:
  explicit SingleDeviceStrategy(int index) : index_(index) {}
  std::string name() const override { return "SingleHPUStrategy"; }
  void setup(const RunEnvironment&, device::Platform& platform) override {
    platform.requireDevices(index_ + 1);
    device_ = &platform.device(index_);
  }
  device::Device& device() override { return *device_; }

 private:
  int index_;
  device::Device* device_ = nullptr;
};

}  // namespace

std::unique_ptr<Strategy> makeSingleDeviceStrategy(int device_index) {
  return std::make_unique<SingleDeviceStrategy>(device_index);
}

}  // namespace hpu::core
