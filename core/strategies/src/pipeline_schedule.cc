#include "pipeline_schedule.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "bf16_wire.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/strategies/pipeline_order.h"
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

Tensor StageLinks::recv(comm::ProcessGroup& pair, const PipelineModule::StageInput& spec) {
  const int sender = 1 - pair.rank();
  Tensor t = Tensor::empty(device_, spec.shape, spec.dtype);
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

namespace {

// A tensor one stage sends another: the activations a chunk reads, or the
// gradient of a chunk's output, for a micro-batch.
struct Message {
  bool activation = true;
  int chunk = 0;  // the receiver's
  std::size_t micro_batch = 0;
  bool operator<(const Message& o) const {
    return std::tie(activation, chunk, micro_batch) < std::tie(o.activation, o.chunk, o.micro_batch);
  }
  bool operator==(const Message&) const = default;
};

// What stage `from` sends stage `to` in a step, in its order. Chunk c of
// stage s is virtual stage c x stages + s: activations go to the next
// virtual stage, gradients to the previous one.
std::vector<Message> sentTo(int from, int to, int stages, int chunks, std::size_t micro_batches, bool backward) {
  std::vector<Message> out;
  const int last = stages * chunks - 1;
  for (const PipelineAction& a : pipelineOrder(from, stages, chunks, micro_batches, backward)) {
    const int v = a.chunk * stages + from, dest = a.forward ? v + 1 : v - 1;
    if (dest < 0 || dest > last || dest % stages != to) continue;
    out.push_back({a.forward, dest / stages, a.micro_batch});
  }
  return out;
}

// The messages from one neighbour: received in its sending order, those
// that arrive before they are needed kept until they are.
class Inbox {
 public:
  explicit Inbox(std::vector<Message> expected) : expected_(std::move(expected)) {}
  template <class Receive>
  Tensor take(const Message& wanted, const Receive& receive) {
    if (auto it = kept_.find(wanted); it != kept_.end()) {
      Tensor t = std::move(it->second);
      kept_.erase(it);
      return t;
    }
    for (;;) {
      HPU_CHECK(next_ < expected_.size(), "pipeline: a {} for chunk {} of micro-batch {} that no neighbour sends",
                wanted.activation ? "activation" : "gradient", wanted.chunk, wanted.micro_batch);
      const Message m = expected_[next_++];
      Tensor t = receive(m);
      if (m == wanted) return t;
      kept_.emplace(m, std::move(t));
    }
  }

 private:
  std::vector<Message> expected_;
  std::size_t next_ = 0;
  std::map<Message, Tensor> kept_;
};

}  // namespace

std::vector<double> runSchedule(PipelineWork& work, StageLinks& links, int stage, int stages, int chunks,
                                std::size_t micro_batches, bool backward) {
  const int last = stages * chunks - 1;
  // The neighbours (-1: none): with virtual stages, a ring.
  const int previous = stage > 0 ? stage - 1 : chunks > 1 ? stages - 1 : -1;
  const int next = stage + 1 < stages ? stage + 1 : chunks > 1 ? 0 : -1;
  std::map<int, Inbox> inboxes;
  for (const int from : {previous, next})
    if (from >= 0 && !inboxes.count(from))
      inboxes.emplace(from, Inbox(sentTo(from, stage, stages, chunks, micro_batches, backward)));
  const auto receive = [&](const Message& m) {
    const PipelineModule::StageInput spec = work.input(m.micro_batch);
    return m.activation ? links.recvForward(spec) : links.recvBackward(spec);
  };

  std::vector<double> losses(micro_batches, 0.0);
  for (const PipelineAction& a : pipelineOrder(stage, stages, chunks, micro_batches, backward)) {
    const int v = a.chunk * stages + stage;
    const std::size_t i = a.micro_batch;
    if (a.forward) {
      Tensor input;
      if (v > 0) {
        Phase wait(work, "pipeline_recv_forward");
        input = inboxes.at(previous).take({true, a.chunk, i}, receive);
      }
      Tensor output;
      {
        Phase run(work, "pipeline_forward");
        output = work.forward(i, a.chunk, input);
      }
      if (v == last) {
        if (!output.shapeOnly()) losses[i] = output.item();
      } else {
        // Every stage passes on hidden states of one shape and dtype (PipelineModule::stageInput).
        const PipelineModule::StageInput expected = work.input(i);
        HPU_CHECK(output.shape() == expected.shape && output.dtype() == expected.dtype,
                  "pipeline stage {} chunk {} output {} {}, but the next expects {} {}", stage, a.chunk,
                  output.shape().str(), device::dtypeName(output.dtype()), expected.shape.str(),
                  device::dtypeName(expected.dtype));
        Phase send(work, "pipeline_send_forward");
        links.sendForward(output);
      }
      continue;
    }
    Tensor grad;
    if (v < last) {
      Phase wait(work, "pipeline_recv_backward");
      grad = inboxes.at(next).take({false, a.chunk, i}, receive);
    }
    Tensor input_grad;
    {
      Phase run(work, "pipeline_backward");
      input_grad = work.backward(i, a.chunk, grad);
    }
    if (v > 0) {
      Phase send(work, "pipeline_send_backward");
      links.sendBackward(input_grad);
    }
  }
  return losses;
}

}  // namespace hpu::core
