#include "hpu/core/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "hpu/core/tensor/op_record.h"
#include "hpu/device/check.h"
#include "hpu/device/numerics.h"
#include "hpu/device/element_loops.h"
#include "hpu/device/threading.h"
#include "hpu/device/vector_clones.h"

namespace hpu::core::optim {

StateBuffer::StateBuffer(device::Device& device, std::int64_t size, bool on_host, DType dtype)
    : size_(static_cast<std::size_t>(size)), dtype_(dtype) {
  if (on_host)
    host_.assign(static_cast<std::size_t>(device.shapeOnly() ? 0 : size), 0.0f);
  else
    device_ = Tensor::zeros(device, {size}, dtype);
}

void Optimizer::attach(std::vector<ParamSlice> slices, device::Device& device, bool offload) {
  slices_ = std::move(slices);
  shape_only_ = device.shapeOnly();
  device_ = &device;
  offload_ = offload;
  attached_empty_ = slices_.empty();
  ranges_.clear();
  state_.clear();
  masters_ = !slices_.empty() && slices_.front().master;
  const std::size_t per_slice = stateNames().size() + (masters_ ? 1 : 0);
  for (const ParamSlice& s : slices_) {
    HPU_CHECK(s.master == masters_, "an optimizer with master weights for some slices only");
    std::vector<StateBuffer> buffers;
    for (std::size_t j = 0; j < per_slice; ++j) buffers.emplace_back(device, s.numel, offload);
    state_.push_back(std::move(buffers));
  }
  parametersLoaded();
}

void Optimizer::parametersLoaded() {
  if (!masters_ || shape_only_) return;
  for (std::size_t i = 0; i < slices_.size(); ++i)
    std::copy_n(slices_[i].values, slices_[i].numel, state_[i].back().data());
}

std::size_t Optimizer::addGroup(double lr) {
  groups_.push_back({lr, 0});
  return groups_.size() - 1;
}

void Optimizer::setGroupRanges(std::vector<std::vector<GroupRange>> per_slice) {
  HPU_CHECK(per_slice.empty() || per_slice.size() == slices_.size(), "group ranges for {} slices, the optimizer has {}", per_slice.size(),
            slices_.size());
  for (std::size_t i = 0; i < per_slice.size(); ++i) {
    std::int64_t end = 0;
    for (const GroupRange& r : per_slice[i]) {
      HPU_CHECK(r.group < groups_.size() && r.offset >= end && r.offset + r.numel <= slices_[i].numel,
                "group range [{}, +{}) of group {} in slice {} of {} elements", r.offset, r.numel, r.group, i,
                slices_[i].numel);
      end = r.offset + r.numel;
    }
  }
  ranges_ = std::move(per_slice);
}

void Optimizer::step() {
  for (Group& g : groups_) ++g.step;
  // The step is one fused op over this rank's slices, as HPU optimizers
  // (FusedAdamW) run: recorded with the elements it reads and writes
  // (values [n], gradients [n], state [n x buffers]), on the device's record
  // even when offloaded to the host, under a name that says where it runs.
  std::int64_t n = 0;
  for (const ParamSlice& s : slices_) n += s.numel;
  const std::int64_t values_dims[] = {n},
                     state_dims[] = {n * static_cast<std::int64_t>(stateNames().size() + (masters_ ? 1 : 0))};
  const device::OperandInfo operands[] = {{values_dims, slices_.empty() ? DType::kFloat32 : slices_.front().dtype},
                                          {values_dims, DType::kFloat32},
                                          {state_dims, DType::kFloat32}};
  std::optional<ops::OpRecord> record;
  if (device_ != nullptr && n > 0)
    record.emplace(*device_, offload_ ? device::OpName("optimizer_step_host") : device::OpName("optimizer_step"),
                   operands);
  if (shape_only_) return;  // nothing to compute; the state is allocated
  std::vector<float*> ptrs;
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    const ParamSlice& s = slices_[i];
    const GroupRange whole{0, s.numel, 0};
    const std::span<const GroupRange> ranges = ranges_.empty() ? std::span(&whole, 1) : std::span(ranges_[i]);
    for (const GroupRange& r : ranges) {
      const Group& g = groups_[r.group];
      ptrs.clear();
      for (StateBuffer& b : state_[i]) ptrs.push_back(b.data() + r.offset);
      const std::span<float> values(s.values + r.offset, static_cast<std::size_t>(r.numel));
      if (!masters_) {
        update({values.data(), s.grads + r.offset, r.numel, s.dtype}, ptrs.data(), g.step, g.lr);
        if (s.dtype != DType::kFloat32) device::roundInPlace(values, s.dtype);
        continue;
      }
      float* master = ptrs.back();
      update({master, s.grads + r.offset, r.numel, DType::kFloat32}, ptrs.data(), g.step, g.lr);
      device::roundCopy({master, values.size()}, values, s.dtype);
    }
  }
}

std::vector<Optimizer::NamedState> Optimizer::stateBuffers() {
  std::vector<NamedState> out;
  auto names = stateNames();
  if (masters_) names.push_back("master");
  for (std::size_t i = 0; i < state_.size(); ++i)
    for (std::size_t j = 0; j < names.size(); ++j)
      out.push_back({names[j] + "." + std::to_string(i), {state_[i][j].data(), state_[i][j].size()}});
  return out;
}

namespace {

// The loop, inlined into each vector level's copy (its restrict pointers
// let it vectorise there).
HPU_LOOP_BODY inline void adamLoop(float* __restrict p, const float* __restrict g, float* __restrict m,
                                   float* __restrict v, std::int64_t begin, std::int64_t end, float l2, float b1,
                                   float b2, float one_minus_b1, float one_minus_b2, float bc2_sqrt, float eps,
                                   float step_size) {
  for (std::int64_t i = begin; i < end; ++i) {
    const float grad = g[i] + l2 * p[i];
    m[i] = m[i] * b1 + one_minus_b1 * grad;
    v[i] = v[i] * b2 + one_minus_b2 * grad * grad;
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    p[i] += -step_size * (m[i] / denom);
  }
}

void adamKernel(float* p, const float* g, float* m, float* v, std::int64_t begin, std::int64_t end, float l2,
                float b1, float b2, float one_minus_b1, float one_minus_b2, float bc2_sqrt, float eps,
                float step_size) {
  device::onVectorLevel([&]() HPU_LOOP_BODY {
    adamLoop(p, g, m, v, begin, end, l2, b1, b2, one_minus_b1, one_minus_b2, bc2_sqrt, eps, step_size);
  });
}

void sgdKernel(float* __restrict p, const float* __restrict g, float* __restrict buf, std::int64_t begin,
               std::int64_t end, float rate, float wd, float mom, float damp, bool first, bool nesterov) {
  device::onVectorLevel([&]() HPU_LOOP_BODY {
    if (buf == nullptr) {
      for (std::int64_t i = begin; i < end; ++i) p[i] -= rate * (g[i] + wd * p[i]);
      return;
    }
    for (std::int64_t i = begin; i < end; ++i) {
      float d = g[i] + wd * p[i];
      buf[i] = first ? d : mom * buf[i] + damp * d;
      d = nesterov ? d + mom * buf[i] : buf[i];
      p[i] -= rate * d;
    }
  });
}

// torch.optim.SGD (single-tensor path): float32 math, scalars from doubles.
class SGD final : public Optimizer {
 public:
  explicit SGD(const SGDOptions& o) : Optimizer(o.lr), o_(o) {}
  std::string name() const override { return "SGD"; }
  std::optional<double> momentum() const override { return o_.momentum; }
  void setMomentum(double m) override { o_.momentum = m; }
  double weightDecay() const override { return o_.weight_decay; }

 protected:
  std::vector<std::string> stateNames() const override {
    if (o_.momentum != 0.0) return {"momentum_buffer"};
    return {};
  }
  void update(const ParamSlice& s, float* const* state, std::int64_t step, double lr) override {
    const float rate = static_cast<float>(lr);
    const float wd = static_cast<float>(o_.weight_decay);
    const float mom = static_cast<float>(o_.momentum);
    const float damp = 1.0f - static_cast<float>(o_.dampening);
    float* buf = o_.momentum == 0.0 ? nullptr : state[0];
    const bool first = step == 1, nesterov = o_.nesterov;
    static device::ParallelSite site("sgd step");
    device::forElementRanges(site, s.numel, [&](std::int64_t begin, std::int64_t end) {
      sgdKernel(s.values, s.grads, buf, begin, end, rate, wd, mom, damp, first, nesterov);
    });
  }

 private:
  SGDOptions o_;
};

// torch.optim.Adam / AdamW (single-tensor path, amsgrad off).
class Adam final : public Optimizer {
 public:
  // `name`: the torch class (Adam with decoupled_weight_decay is still Adam).
  Adam(const AdamOptions& o, std::string name) : Optimizer(o.lr), o_(o), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::optional<double> momentum() const override { return o_.beta1; }
  void setMomentum(double beta1) override { o_.beta1 = beta1; }
  double weightDecay() const override { return o_.weight_decay; }

 protected:
  std::vector<std::string> stateNames() const override { return {"exp_avg", "exp_avg_sq"}; }
  void update(const ParamSlice& s, float* const* state, std::int64_t step, double lr) override {
    const double bc1 = 1.0 - std::pow(o_.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(o_.beta2, static_cast<double>(step));
    const float step_size = static_cast<float>(lr / bc1);
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    const float b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
    const float one_minus_b1 = static_cast<float>(1.0 - o_.beta1);
    const float one_minus_b2 = static_cast<float>(1.0 - o_.beta2);
    const float eps = static_cast<float>(o_.eps);
    const float wd = static_cast<float>(o_.weight_decay);
    const float decay = static_cast<float>(1.0 - lr * o_.weight_decay);
    const bool decoupled = o_.decoupled_weight_decay;
    const std::int64_t n = s.numel;
    if (decoupled) {
      static device::ParallelSite decay_site("weight decay");
      device::forElementRanges(decay_site, n, [&](std::int64_t begin, std::int64_t end) {
        float* __restrict p = s.values;
        for (std::int64_t i = begin; i < end; ++i) p[i] *= decay;
      });
    }
    const float l2 = decoupled ? 0.0f : wd;
    static device::ParallelSite site("adam step");
    device::forElementRanges(site, n, [&](std::int64_t begin, std::int64_t end) {
      adamKernel(s.values, s.grads, state[0], state[1], begin, end, l2, b1, b2, one_minus_b1, one_minus_b2, bc2_sqrt,
                 eps, step_size);
    });
  }

 private:
  AdamOptions o_;
  std::string name_;
};

// torch.optim.RMSprop (single-tensor path): float32 math, scalars from doubles.
class RMSprop final : public Optimizer {
 public:
  explicit RMSprop(const RMSpropOptions& o) : Optimizer(o.lr), o_(o) {}
  std::string name() const override { return "RMSprop"; }
  std::optional<double> momentum() const override { return o_.momentum; }
  void setMomentum(double m) override { o_.momentum = m; }
  double weightDecay() const override { return o_.weight_decay; }

 protected:
  // square_avg, then momentum_buffer (momentum > 0) and grad_avg (centered).
  std::vector<std::string> stateNames() const override {
    std::vector<std::string> names{"square_avg"};
    if (o_.momentum > 0) names.emplace_back("momentum_buffer");
    if (o_.centered) names.emplace_back("grad_avg");
    return names;
  }
  void update(const ParamSlice& s, float* const* state, std::int64_t, double lr) override {
    const float rate = static_cast<float>(lr), alpha = static_cast<float>(o_.alpha);
    const float one_minus_alpha = static_cast<float>(1.0 - o_.alpha), eps = static_cast<float>(o_.eps);
    const float wd = static_cast<float>(o_.weight_decay), mom = static_cast<float>(o_.momentum);
    float* __restrict sq = state[0];
    float* __restrict buf = o_.momentum > 0 ? state[1] : nullptr;
    float* __restrict gavg = o_.centered ? state[o_.momentum > 0 ? 2 : 1] : nullptr;
    static device::ParallelSite site("rmsprop step");
    device::forElementRanges(site, s.numel, [&](std::int64_t begin, std::int64_t end) {
      float* __restrict p = s.values;
      const float* __restrict g = s.grads;
      for (std::int64_t i = begin; i < end; ++i) {
        const float grad = g[i] + wd * p[i];
        sq[i] = sq[i] * alpha + one_minus_alpha * grad * grad;
        float avg;
        if (gavg != nullptr) {
          gavg[i] += one_minus_alpha * (grad - gavg[i]);  // lerp_(grad, 1 - alpha)
          avg = std::sqrt(sq[i] - gavg[i] * gavg[i]) + eps;
        } else {
          avg = std::sqrt(sq[i]) + eps;
        }
        if (buf != nullptr) {
          buf[i] = buf[i] * mom + grad / avg;
          p[i] -= rate * buf[i];
        } else {
          p[i] += -rate * grad / avg;  // addcdiv_'s order: (value * t1) / t2
        }
      }
    });
  }

 private:
  RMSpropOptions o_;
};

// torch.optim.Adagrad (single-tensor path).
class Adagrad final : public Optimizer {
 public:
  explicit Adagrad(const AdagradOptions& o) : Optimizer(o.lr), o_(o) {}
  std::string name() const override { return "Adagrad"; }
  double weightDecay() const override { return o_.weight_decay; }

 protected:
  std::vector<std::string> stateNames() const override { return {"sum"}; }
  void update(const ParamSlice& s, float* const* state, std::int64_t step, double lr) override {
    const float clr = static_cast<float>(lr / (1.0 + static_cast<double>(step - 1) * o_.lr_decay));
    const float wd = static_cast<float>(o_.weight_decay), eps = static_cast<float>(o_.eps);
    const float initial = static_cast<float>(o_.initial_accumulator_value);
    const bool first = step == 1;  // torch fills the sum with initial_accumulator_value at construction
    float* __restrict sum = state[0];
    static device::ParallelSite site("adagrad step");
    device::forElementRanges(site, s.numel, [&](std::int64_t begin, std::int64_t end) {
      float* __restrict p = s.values;
      const float* __restrict g = s.grads;
      for (std::int64_t i = begin; i < end; ++i) {
        const float grad = g[i] + wd * p[i];
        sum[i] = (first ? initial : sum[i]) + grad * grad;
        p[i] += -clr * grad / (std::sqrt(sum[i]) + eps);
      }
    });
  }

 private:
  AdagradOptions o_;
};

}  // namespace

std::unique_ptr<Optimizer> makeSGD(const SGDOptions& o) { return std::make_unique<SGD>(o); }
std::unique_ptr<Optimizer> makeRMSprop(const RMSpropOptions& o) { return std::make_unique<RMSprop>(o); }
std::unique_ptr<Optimizer> makeAdagrad(const AdagradOptions& o) { return std::make_unique<Adagrad>(o); }
std::unique_ptr<Optimizer> makeAdam(const AdamOptions& o) { return std::make_unique<Adam>(o, "Adam"); }
std::unique_ptr<Optimizer> makeAdamW(AdamOptions o) {
  o.decoupled_weight_decay = true;
  return std::make_unique<Adam>(o, "AdamW");
}

}  // namespace hpu::core::optim
