// libFuzzer target: what a rank reads from a shared-memory lane another
// process of the job writes: the slot line (state, link sequence number,
// byte count) and the collective message in the slot (its 40-byte header,
// a barrier's name, the payload), taken by ShmReceiver and checked by the
// collective that waits for it. Input: u32 the sequence number the receiver
// expects | u32 state | u32 sequence | u32 bytes | u8 which collective the
// receiver runs | the slot's contents. A corrupt lane must come back as a
// CommError (CollectiveMismatchError included); a sanitizer report or an
// abort is a bug.
#include <cstdint>
#include <cstring>
#include <memory>

#include "collectives/context.h"
#include "hpu/comm/errors.h"
#include "one_message_transport.h"
#include "zmq/shm_lane.h"

using namespace hpu::comm;
using namespace hpu::comm::detail;

namespace {

std::uint32_t word(const std::uint8_t* data, std::size_t at) {
  std::uint32_t w;
  std::memcpy(&w, data + at, sizeof w);
  return w;
}

// The collectives the receiver may be running: a small allreduce and a barrier.
CollectiveDescriptor expected(std::uint8_t which) {
  CollectiveDescriptor d;
  if (which % 2 == 0) {
    d.count = 16;
  } else {
    d.kind = CollectiveKind::kBarrier;
    d.dtype = DType::kByte;
    d.name = "epoch_end";
  }
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kFixed = 17;
  if (size < kFixed) return 0;
  auto sender = ShmSender::create(0, 1);
  if (!sender) return 0;  // no /dev/shm here
  ShmReceiver receiver(sender->segment().name());
  ShmSegment& segment = sender->segment();
  const std::size_t contents = std::min(size - kFixed, ShmSegment::kSlotBytes);
  std::memcpy(segment.slot(0), data + kFixed, contents);
  auto& line = segment.line(0);
  line.sequence = word(data, 8);
  line.bytes = word(data, 12);
  line.state.store(word(data, 4), std::memory_order_release);
  try {
    test_support::OneMessageTransport transport(receiver.tryTake(word(data, 0)));
    const CollectiveDescriptor descriptor = expected(data[16]);
    CollectiveContext context(transport, descriptor, Transport::Clock::now(), std::chrono::milliseconds(1), 1 << 18);
    context.recv(0, descriptor.kind == CollectiveKind::kBarrier ? 0 : 64);
  } catch (const CommError&) {
  }
  return 0;
}
