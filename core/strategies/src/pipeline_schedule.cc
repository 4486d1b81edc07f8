#include "pipeline_schedule.h"

#include <algorithm>

#include "bf16_wire.h"
#include "hpu/core/base/errors.h"
#include "hpu/device/check.h"

namespace hpu::core {

namespace {

// A phase of the schedule for the profiler, for its scope.
class Phase {
 public:
  Phase(PipelineWork& work, std::string_view name) : work_(work), name_(name) { work_.start(name_); }
  ~Phase() { work_.stop(name_); }
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  PipelineWork& work_;
  std::string_view name_;
};

}  // namespace

void StageLinks::send(comm::ProcessGroup& pair, const Tensor& t) {
  const int me = pair.rank();
  const auto count = static_cast<std::size_t>(t.numel());
  const float* data = t.shapeOnly() ? nullptr : t.data();
  if (t.dtype() == DType::kBFloat16) {
    std::vector<std::uint16_t> bits;
    wire::toBits(std::span<const float>(data, count), bits);
    pair.broadcast(wire::bitsView(bits, count), me);
    return;
  }
  // The root of a broadcast only reads its buffer.
  pair.broadcast(comm::BufferView(std::span<float>(const_cast<float*>(data), count)), me);
}

Tensor StageLinks::recv(comm::ProcessGroup& pair, device::Device& device, const PipelineModule::StageInput& spec) {
  const int sender = 1 - pair.rank();
  Tensor t = Tensor::empty(device, spec.shape, spec.dtype);
  const auto count = static_cast<std::size_t>(t.numel());
  float* data = t.shapeOnly() ? nullptr : t.data();
  if (spec.dtype == DType::kBFloat16) {
    std::vector<std::uint16_t> bits(data != nullptr ? count : 0);
    pair.broadcast(wire::bitsView(bits, count), sender);
    wire::fromBits(bits, std::span<float>(data, data != nullptr ? count : 0));
  } else {
    pair.broadcast(comm::BufferView(std::span<float>(data, count)), sender);
  }
  return t;
}

void StageLinks::observe(const std::shared_ptr<comm::CollectiveObserver>& observer) {
  for (Link* link : {&previous_, &next_})
    for (comm::ProcessGroup* g : {link->activations.get(), link->gradients.get()})
      if (g) g->setObserver(observer);
}

std::vector<double> runSchedule(PipelineWork& work, StageLinks& links, int stage, int stages,
                                std::size_t micro_batches, bool backward) {
  std::vector<double> losses(micro_batches, 0.0);
  std::vector<Tensor> outputs(micro_batches);
  std::size_t forwarded = 0, backwarded = 0;
  const auto forward = [&] {
    const std::size_t i = forwarded++;
    Tensor input;
    if (!links.first()) {
      Phase wait(work, "pipeline_recv_forward");
      input = links.recvForward(work.input(i));
    }
    Tensor output;
    {
      Phase run(work, "pipeline_forward");
      output = work.forward(i, input);
    }
    if (links.last()) {
      if (!output.shapeOnly()) losses[i] = output.item();
    } else {
      // Every stage passes on hidden states of one shape and dtype (PipelineModule::stageInput).
      const PipelineModule::StageInput expected = work.input(i);
      HPU_CHECK(output.shape() == expected.shape && output.dtype() == expected.dtype,
                "pipeline stage {} output {} {}, but the next stage expects {} {}", stage, output.shape().str(),
                device::dtypeName(output.dtype()), expected.shape.str(), device::dtypeName(expected.dtype));
      Phase send(work, "pipeline_send_forward");
      links.sendForward(output);
    }
    outputs[i] = std::move(output);
  };
  const auto backwardOne = [&] {
    const std::size_t i = backwarded++;
    Tensor grad;
    if (!links.last()) {
      Phase wait(work, "pipeline_recv_backward");
      grad = links.recvBackward(outputs[i]);
    }
    Tensor input_grad;
    {
      Phase run(work, "pipeline_backward");
      input_grad = work.backward(i, grad);
    }
    outputs[i] = Tensor();
    if (!links.first()) {
      Phase send(work, "pipeline_send_backward");
      links.sendBackward(input_grad);
    }
  };
  if (!backward) {
    while (forwarded < micro_batches) forward();
    return losses;
  }
  const std::size_t warmup = std::min<std::size_t>(static_cast<std::size_t>(stages - stage - 1), micro_batches);
  while (forwarded < warmup) forward();
  while (forwarded < micro_batches) {
    forward();
    backwardOne();
  }
  while (backwarded < micro_batches) backwardOne();
  return losses;
}

}  // namespace hpu::core
