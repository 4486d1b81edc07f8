#include "hpu/core/nn/module.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "hpu/core/base/errors.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/ops/parallel.h"
#include "hpu/core/tensor/autograd.h"

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

bool Module::recomputesNow(const KVCache* cache) const {
  return recompute_ && training_ && cache == nullptr && autograd::currentTape() != nullptr;
}

// A recomputation in backward runs inside the hooks (ZeRO-3 gathers again)
// and splits the sequence as the forward did.
Tensor Module::operator()(const Tensor& x) {
  if (!recomputesNow(nullptr)) return hooked([&] { return forward(x); });
  const bool sequence_parallel = ops::sequenceParallel();
  return ops::checkpoint(
      [this, sequence_parallel](const Tensor& in) {
        const ops::SequenceParallelScope scope(sequence_parallel);
        return hooked([&] { return forward(in); });
      },
      x, recompute_rng_);
}

Tensor Module::operator()(const Inputs& inputs) {
  if (!recomputesNow(inputs.kv_cache)) return hooked([&] { return forward(inputs); });
  std::vector<std::string> names;
  std::vector<Tensor> tensors;
  for (const auto& [name, t] : inputs.tensors) {
    names.push_back(name);
    tensors.push_back(t);
  }
  const bool sequence_parallel = ops::sequenceParallel();
  return ops::checkpoint(
      [this, names, sequence_parallel](const std::vector<Tensor>& in) {
        const ops::SequenceParallelScope scope(sequence_parallel);
        Inputs again;
        for (std::size_t i = 0; i < names.size(); ++i) again.tensors.set(names[i], in[i]);
        return hooked([&] { return forward(again); });
      },
      tensors, recompute_rng_);
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

ParameterCount Module::countParameters(std::span<const Tensor> except) const {
  ParameterCount n;
  for (auto& p : namedParameters()) {
    if (listed(p.tensor, except)) continue;
    const std::int64_t whole = p.shard.fullShape(p.tensor.shape()).numel() * p.expert_parallel;
    n.total += whole;
    if (p.tensor.requiresGrad()) n.trainable += whole;
    n.padding += p.shard.paddingNumel(p.tensor.shape()) * p.expert_parallel;
  }
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

namespace {
void visit(Module& m, const std::function<void(Module&)>& f) {
  f(m);
  for (auto& [name, child] : m.mutableChildren()) visit(*child, f);
}
}  // namespace

std::vector<Module*> modulesOfClasses(Module& root, const std::vector<std::string>& classes, const std::string& setting) {
  std::vector<Module*> out;
  std::vector<std::string> present;
  visit(root, [&](Module& m) {
    const std::string type = m.typeName();
    if (std::find(present.begin(), present.end(), type) == present.end()) present.push_back(type);
    if (std::find(classes.begin(), classes.end(), type) != classes.end()) out.push_back(&m);
  });
  for (const std::string& c : classes)
    if (std::find(present.begin(), present.end(), c) == present.end()) {
      std::string list;
      for (const std::string& p : present) list += (list.empty() ? "" : ", ") + p;
      throw UsageError(setting + ": " + c + " is the class of no module of " + root.typeName() +
                       config::didYouMean(c, present) + " (its classes: " + list + ")");
    }
  return out;
}

}  // namespace hpu::core::nn
