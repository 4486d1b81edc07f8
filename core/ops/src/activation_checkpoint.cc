// Activation checkpointing: ops::checkpoint (see ops.h).
#include <optional>

#include "hpu/core/ops/autocast.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/tensor/autograd.h"

namespace hpu::core::ops {

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, Generator* rng, bool on_host) {
  autograd::Tape* tape = autograd::currentTape();
  const std::optional<Generator::State> rng_state = rng ? std::optional(rng->state()) : std::nullopt;
  // The recompute runs in the forward's autocast state, as torch's checkpoint does.
  const autocast::State amp = autocast::current();
  Tensor y;
  {
    autograd::TapeScope no_record(nullptr);
    y = f(x);
  }
  if (tape == nullptr) return y;
  // The saved input: the tensor itself, or a host copy (cpu_checkpointing).
  struct Saved {
    Tensor device;
    std::vector<float> host;
  };
  auto saved = std::make_shared<Saved>();
  if (!on_host)
    saved->device = x;
  else if (!x.shapeOnly())
    saved->host = x.toHost();
  y.setRequiresGrad(true);
  if (x.requiresGrad()) autograd::noteUse(x);
  tape->record([f, x = autograd::GradRef(x), y = autograd::GradRef(y), saved, rng, rng_state, amp] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    device::Device& dev = x.device();
    Tensor input = saved->device.defined() ? saved->device.detach()
                   : dev.shapeOnly()       ? Tensor::empty(dev, x.shape(), x.dtype())
                                           : Tensor::fromHost(dev, x.shape(), saved->host, x.dtype());
    input.setRequiresGrad(x.requiresGrad());
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
      recomputed = f(input);
    }
    if (rng) rng->setState(outer);
    local.backward(recomputed, gy);
    if (x.requiresGrad()) {
      if (Tensor gx = input.grad(); gx.defined()) {
        autograd::GradTarget g = autograd::gradTarget(x);
        if (g.data != nullptr)
          for (std::int64_t i = 0; i < x.numel(); ++i)
            g.data[i] = g.accumulate ? g.data[i] + gx.data()[i] : gx.data()[i];
      }
      autograd::gradWritten(x);
    }
  });
  return y;
}

}  // namespace hpu::core::ops
