#include "hpu/core/optim/optimizer.h"

#include <cmath>
#include <cstring>

#include "hpu/device/numerics.h"

namespace hpu::core::optim {

void Optimizer::attach(std::vector<ParamSlice> slices, device::Device& device) {
  slices_ = std::move(slices);
  attached_empty_ = slices_.empty();
  state_.clear();
  const std::size_t per_slice = stateNames().size();
  for (const ParamSlice& s : slices_) {
    std::vector<Tensor> buffers;
    for (std::size_t i = 0; i < per_slice; ++i) buffers.push_back(Tensor::zeros(device, {s.numel}));
    state_.push_back(std::move(buffers));
  }
}

void Optimizer::step() {
  ++step_;
  std::vector<float*> ptrs;
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    ptrs.clear();
    for (Tensor& t : state_[i]) ptrs.push_back(t.data());
    update(slices_[i], ptrs.data(), step_);
    if (slices_[i].dtype != DType::kFloat32)
      device::roundInPlace({slices_[i].values, static_cast<std::size_t>(slices_[i].numel)}, slices_[i].dtype);
  }
}

std::vector<nn::NamedTensor> Optimizer::stateTensors() const {
  std::vector<nn::NamedTensor> out;
  const auto names = stateNames();
  for (std::size_t i = 0; i < state_.size(); ++i)
    for (std::size_t j = 0; j < names.size(); ++j)
      out.push_back({names[j] + "." + std::to_string(i), state_[i][j]});
  return out;
}

namespace {

// torch.optim.SGD (single-tensor path): float32 math, scalars from doubles.
class SGD final : public Optimizer {
 public:
  explicit SGD(const SGDOptions& o) : Optimizer(o.lr), o_(o) {}
  std::string name() const override { return "SGD"; }

 protected:
  std::vector<std::string> stateNames() const override {
    if (o_.momentum != 0.0) return {"momentum_buffer"};
    return {};
  }
  void update(const ParamSlice& s, float* const* state, std::int64_t step) override {
    const float lr = static_cast<float>(lr());
    const float wd = static_cast<float>(o_.weight_decay);
    const float mom = static_cast<float>(o_.momentum);
    const float damp = 1.0f - static_cast<float>(o_.dampening);
    float* p = s.values;
    const float* g = s.grads;
    const std::int64_t n = s.numel;
    if (o_.momentum == 0.0) {
#pragma omp parallel for simd if (n > (1 << 16))
      for (std::int64_t i = 0; i < n; ++i) {
        const float d = wd != 0.0f ? g[i] + wd * p[i] : g[i];
        p[i] -= lr * d;
      }
      return;
    }
    float* buf = state[0];
    const bool first = step == 1;
    const bool nesterov = o_.nesterov;
#pragma omp parallel for simd if (n > (1 << 16))
    for (std::int64_t i = 0; i < n; ++i) {
      float d = wd != 0.0f ? g[i] + wd * p[i] : g[i];
      buf[i] = first ? d : mom * buf[i] + damp * d;
      d = nesterov ? d + mom * buf[i] : buf[i];
      p[i] -= lr * d;
    }
  }

 private:
  SGDOptions o_;
};

// torch.optim.Adam / AdamW (single-tensor path, amsgrad off).
class Adam final : public Optimizer {
 public:
  explicit Adam(const AdamOptions& o) : Optimizer(o.lr), o_(o) {}
  std::string name() const override { return o_.decoupled_weight_decay ? "AdamW" : "Adam"; }

 protected:
  std::vector<std::string> stateNames() const override { return {"exp_avg", "exp_avg_sq"}; }
  void update(const ParamSlice& s, float* const* state, std::int64_t step) override {
    const double bc1 = 1.0 - std::pow(o_.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(o_.beta2, static_cast<double>(step));
    const float step_size = static_cast<float>(lr() / bc1);
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    const float b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
    const float one_minus_b1 = static_cast<float>(1.0 - o_.beta1);
    const float one_minus_b2 = static_cast<float>(1.0 - o_.beta2);
    const float eps = static_cast<float>(o_.eps);
    const float wd = static_cast<float>(o_.weight_decay);
    const float decay = static_cast<float>(1.0 - lr() * o_.weight_decay);
    const bool decoupled = o_.decoupled_weight_decay;
    float* p = s.values;
    const float* g = s.grads;
    float* m = state[0];
    float* v = state[1];
    const std::int64_t n = s.numel;
#pragma omp parallel for simd if (n > (1 << 16))
    for (std::int64_t i = 0; i < n; ++i) {
      float grad = g[i];
      if (decoupled)
        p[i] *= decay;
      else if (wd != 0.0f)
        grad += wd * p[i];
      m[i] = m[i] * b1 + one_minus_b1 * grad;
      v[i] = v[i] * b2 + one_minus_b2 * grad * grad;
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      p[i] += -step_size * (m[i] / denom);
    }
  }

 private:
  AdamOptions o_;
};

}  // namespace

std::unique_ptr<Optimizer> makeSGD(const SGDOptions& o) { return std::make_unique<SGD>(o); }
std::unique_ptr<Optimizer> makeAdam(const AdamOptions& o) { return std::make_unique<Adam>(o); }
std::unique_ptr<Optimizer> makeAdamW(AdamOptions o) {
  o.decoupled_weight_decay = true;
  return std::make_unique<Adam>(o);
}

}  // namespace hpu::core::optim
