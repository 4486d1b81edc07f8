// What a collective does with a message that is not what a rank of this job
// sends: found by fuzz_shm_lane, each aborted the process or read out of
// bounds; now each is a CommError naming the collective and the peer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "../../comm/src/collectives/context.h"
#include "hpu/comm/errors.h"
#include "one_message_transport.h"

namespace hpu::comm::detail {
namespace {

using ::testing::HasSubstr;

class BytesMessage final : public Message {
 public:
  explicit BytesMessage(std::vector<std::byte> bytes) : bytes_(std::move(bytes)) {}
  std::span<const std::byte> bytes() const override { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

CollectiveDescriptor barrierNamed(const std::string& name) {
  CollectiveDescriptor d;
  d.kind = CollectiveKind::kBarrier;
  d.dtype = DType::kByte;
  d.name = name;
  return d;
}

// The error rank 1 raises running `mine` when `header` followed by `rest` arrives.
std::string errorOf(const CollectiveDescriptor& mine, const Header& header, const std::string& rest,
                    std::size_t expectedBytes) {
  std::vector<std::byte> bytes(header.begin(), header.end());
  for (char c : rest) bytes.push_back(static_cast<std::byte>(c));
  test_support::OneMessageTransport transport(std::make_unique<BytesMessage>(std::move(bytes)));
  CollectiveContext context(transport, mine, Transport::Clock::now(), std::chrono::milliseconds(1), 1 << 18);
  try {
    context.recv(0, expectedBytes);
  } catch (const CommError& e) {
    return e.what();
  }
  return "no error";
}

TEST(CollectiveContext, AMessageOutOfStepIsAnError) {
  const CollectiveDescriptor barrier = barrierNamed("epoch_end");
  EXPECT_THAT(errorOf(barrier, encodeHeader(barrier, 7), "epoch_end", 0),
              HasSubstr("rank 1: barrier #0 'epoch_end': message 7 from rank 0 arrived where message 0 was due"));
}

// An allreduce's header claiming a name: it used to be skipped past the end
// of the message.
TEST(CollectiveContext, ANameLongerThanTheMessageIsAnError) {
  CollectiveDescriptor allreduce;
  allreduce.count = 16;
  Header header = encodeHeader(allreduce, 0);
  const std::uint32_t claimed = 1000;
  std::memcpy(header.data() + 32, &claimed, sizeof claimed);
  EXPECT_THAT(errorOf(allreduce, header, std::string(64, '\0'), 64),
              HasSubstr("rank 1: allreduce #0 (sum, float32, 16 elements, auto): malformed message of 104 bytes from "
                        "rank 0: its name claims 1000 bytes"));
}

}  // namespace
}  // namespace hpu::comm::detail
