// Activation checkpointing: ops::checkpoint (see ops.h).
#include <optional>

#include "hpu/core/ops/autocast.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/tensor/autograd.h"
#include "op_support.h"

namespace hpu::core::ops {

Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& xs,
                  Generator* rng, bool on_host) {
  autograd::Tape* tape = autograd::currentTape();
  const std::optional<Generator::State> rng_state = rng ? std::optional(rng->state()) : std::nullopt;
  // The recompute runs in the forward's autocast state, as torch's checkpoint does.
  const autocast::State amp = autocast::current();
  Tensor y;
  {
    autograd::TapeScope no_record(nullptr);
    y = f(xs);
  }
  if (tape == nullptr) return y;
  // The saved inputs: the tensors themselves, or host copies (cpu_checkpointing).
  struct Saved {
    std::vector<Tensor> device;
    std::vector<std::vector<float>> host;
  };
  auto saved = std::make_shared<Saved>();
  std::vector<autograd::GradRef> inputs;
  for (const Tensor& x : xs) {
    saved->device.push_back(on_host ? Tensor() : x);
    saved->host.push_back(on_host && !x.shapeOnly() ? x.toHost() : std::vector<float>{});
    inputs.emplace_back(x);
    if (x.requiresGrad()) autograd::noteUse(x);
  }
  y.setRequiresGrad(true);
  tape->record([f, inputs, y = autograd::GradRef(y), saved, rng, rng_state, amp] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    std::vector<Tensor> again;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const autograd::GradRef& x = inputs[i];
      device::Device& dev = x.device();
      Tensor input = saved->device[i].defined() ? saved->device[i].detach()
                     : dev.shapeOnly()          ? Tensor::empty(dev, x.shape(), x.dtype())
                                                : Tensor::fromHost(dev, x.shape(), saved->host[i], x.dtype());
      input.setRequiresGrad(x.requiresGrad());
      again.push_back(std::move(input));
    }
    Generator::State outer{};
    if (rng) {
      outer = rng->state();
      rng->setState(*rng_state);
    }
    autograd::Tape local;
    Tensor recomputed;
    {
      autograd::TapeScope record(&local);
      autocast::Scope forward_precision(amp.enabled, amp.dtype);
      recomputed = f(again);
    }
    if (rng) rng->setState(outer);
    local.backward(recomputed, gy);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].requiresGrad()) continue;
      if (const Tensor gx = again[i].grad(); gx.defined())
        detail::accumulateGrad(inputs[i], gx.data());
      else
        autograd::gradWritten(inputs[i]);
    }
  });
  return y;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, Generator* rng, bool on_host) {
  return checkpoint([f](const std::vector<Tensor>& xs) { return f(xs[0]); }, std::vector<Tensor>{x}, rng, on_host);
}

}  // namespace hpu::core::ops
