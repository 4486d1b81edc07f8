#include "hpu/core/nn/module.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace hpu::core::nn {

Tensor Module::forward(const Tensor&) { throw std::logic_error(typeName() + " has no single-input forward()"); }

Tensor Module::forward(const Inputs& inputs) {
  if (inputs.tensors.empty()) throw std::logic_error(typeName() + ".forward() got no inputs");
  return forward(inputs.tensors.front().second);
}

template <class Forward>
Tensor Module::hooked(Forward forward) {
  if (!hooks_) {
    Tensor y = forward();
    last_output_shape_ = y.shape();
    return y;
  }
  hooks_->before(*this);
  struct After {
    ForwardHooks& h;
    Module& m;
    ~After() { h.after(m); }
  } after{*hooks_, *this};
  Tensor y = forward();
  last_output_shape_ = y.shape();
  return y;
}

Tensor Module::operator()(const Tensor& x) {
  return hooked([&] { return forward(x); });
}

Tensor Module::operator()(const Inputs& inputs) {
  return hooked([&] { return forward(inputs); });
}

std::size_t Module::fusesWith(std::span<Module* const>) const { return 0; }

Tensor Module::forwardFused(std::span<Module* const>, const Tensor&, Shape&) {
  throw std::logic_error(typeName() + " has no fused forward()");
}

Tensor Module::callFused(std::span<Module* const> fused, const Tensor& x) {
  Shape own;
  // Hooks nest as the modules would run: this one outermost.
  const std::function<Tensor(std::size_t)> inside = [&](std::size_t i) {
    return i == fused.size() ? forwardFused(fused, x, own) : fused[i]->hooked([&] { return inside(i + 1); });
  };
  Tensor y = hooked([&] { return inside(0); });
  last_output_shape_ = own;
  return y;
}

void Module::setForwardHooks(const std::shared_ptr<ForwardHooks>& hooks) {
  hooks_ = hooks;
  for (auto& [name, child] : children_) child->setForwardHooks(hooks);
}

Tensor Module::registerParameter(std::string name, Tensor t, Shard shard) {
  t.setRequiresGrad(true);
  params_.push_back({std::move(name), t, shard});
  return t;
}

Tensor Module::adoptParameter(std::string name, Tensor t, Shard shard) {
  params_.push_back({std::move(name), t, shard});
  return t;
}

Tensor Module::registerBuffer(std::string name, Tensor t, BufferOptions options) {
  buffers_.push_back({.name = std::move(name), .tensor = t, .optional = options.optional});
  return t;
}

void Module::collect(const std::string& prefix, bool params, std::vector<NamedTensor>& out,
                     int expert_parallel) const {
  expert_parallel = std::max(expert_parallel, expert_parallel_);
  for (const auto& p : params ? params_ : buffers_) out.push_back({prefix + p.name, p.tensor, p.shard, expert_parallel, p.optional});
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, out, expert_parallel);
}

std::vector<NamedTensor> Module::namedParameters() const {
  std::vector<NamedTensor> out;
  collect("", true, out);
  return out;
}

std::vector<NamedTensor> Module::namedBuffers() const {
  std::vector<NamedTensor> out;
  collect("", false, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& p : namedParameters()) out.push_back(p.tensor);
  return out;
}

namespace {
bool listed(const Tensor& t, std::span<const Tensor> tensors) {
  return std::any_of(tensors.begin(), tensors.end(), [&](const Tensor& o) { return o.sameAs(t); });
}
}  // namespace

std::int64_t Module::numParameters(std::span<const Tensor> except) const {
  std::int64_t n = 0;
  // An expert-parallel rank holds 1 / expert_parallel of its layer's experts, all of one shape.
  for (auto& p : namedParameters())
    if (!listed(p.tensor, except)) n += p.shard.fullShape(p.tensor.shape()).numel() * p.expert_parallel;
  return n;
}

std::int64_t Module::numPaddingElements(std::span<const Tensor> except) const {
  std::int64_t n = 0;
  for (auto& p : namedParameters())
    if (!listed(p.tensor, except)) n += p.shard.paddingNumel(p.tensor.shape()) * p.expert_parallel;
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

}  // namespace hpu::core::nn
