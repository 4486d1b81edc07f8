#include "hpu/core/strategies/strategy.h"

#include "hpu/core/base/errors.h"
#include "hpu/device/check.h"

namespace hpu::core {

std::vector<optim::ParamSlice> Strategy::optimizerSlices(nn::FlatParameters& params) {
  std::vector<optim::ParamSlice> slices;
  for (auto& b : params.buckets())
    slices.push_back({b.valueSpan().data(), b.gradSpan().data(), b.numel, b.dtype});
  return slices;
}

std::vector<Strategy::SliceShard> Strategy::optimizerShards(nn::FlatParameters& params) {
  std::vector<SliceShard> out;
  for (auto& b : params.buckets()) out.push_back({0, b.numel, b.numel});
  return out;
}

optim::GradientView Strategy::gradients(nn::FlatParameters& params) {
  optim::GradientView v;
  for (auto& b : params.buckets()) v.spans.push_back(b.gradSpan());
  return v;
}

std::vector<double> Strategy::runPipeline(PipelineWork&, std::size_t, bool) {
  HPU_CHECK(false, "{} runs no pipeline stages", name());
  return {};
}

std::uint64_t Strategy::gradientDeviceBytes(const nn::FlatParameters& params) const {
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < params.buckets().size(); ++i)
    if (params.gradsAllocated(i)) bytes += params.buckets()[i].grads->logicalBytes();
  return bytes;
}

device::Device& deviceFor(device::Platform& platform, const RunEnvironment& run, int local_rank) {
  const int index = run.device_indices.empty() ? local_rank : run.device_indices.at(static_cast<std::size_t>(local_rank));
  platform.requireDevices(index + 1);
  return platform.device(index);
}

namespace {

class SingleDeviceStrategy final : public Strategy {
 public:
  explicit SingleDeviceStrategy(int index) : index_(index) {}
  std::string name() const override { return "SingleHPUStrategy"; }
  // trainer.devices=[i] chooses device i; else the strategy's own index.
  void setup(const RunEnvironment& run, device::Platform& platform) override {
    device_ = run.device_indices.empty() ? &deviceFor(platform, run, index_) : &deviceFor(platform, run, 0);
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
