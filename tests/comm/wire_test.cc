// The control protocol's codec: round trips, MACs, and hostile input (every
// truncation and random corruption either decodes or raises
// MalformedMessage; nothing crashes or reads out of bounds).
#include <gtest/gtest.h>

#include <random>

#include "../../comm/src/wire/codec.h"
#include "../../comm/src/wire/control_messages.h"
#include "hpu/comm/job_token.h"
#include "sample_messages.h"

namespace hpu::comm::detail {
namespace {

using test_support::sampleHello;

const JobToken::Key kKey = JobToken::fromEnv({{"HPU_JOB_TOKEN", "wire-test-token-0123456789"}}).derive("mac");
const JobToken::Key kOtherKey = JobToken::fromEnv({{"HPU_JOB_TOKEN", "other-test-token-0123456789"}}).derive("mac");

std::span<const std::byte> bytesOf(const std::string& s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

TEST(Wire, HelloRoundTripsAndItsMacNeedsTheSameToken) {
  const std::string bytes = encode(sampleHello(), kKey);
  const auto decoded = std::get<Hello>(decode(bytesOf(bytes), kKey));
  EXPECT_TRUE(decoded.authentic);
  EXPECT_EQ(decoded.rank, 5u);
  EXPECT_EQ(decoded.config.entries, sampleHello().config.entries);
  EXPECT_EQ(decoded.endpoints.ipc, "ipc://@hpu-x");
  EXPECT_FALSE(std::get<Hello>(decode(bytesOf(bytes), kOtherKey)).authentic);
  std::string tampered = bytes;
  tampered[10] ^= 1;
  EXPECT_FALSE(std::get<Hello>(decode(bytesOf(tampered), kKey)).authentic);
}

TEST(Wire, StoreAndPeerMessagesRoundTrip) {
  StoreRequest request{StoreRequest::Op::kWait, 17, {"a", "b"}, "", 0, 1500};
  const auto back = std::get<StoreRequest>(decode(bytesOf(encode(request, kKey)), kKey));
  EXPECT_EQ(back.keys, request.keys);
  EXPECT_EQ(back.timeoutMs, 1500u);
  const auto down = std::get<PeerDown>(decode(bytesOf(encode(PeerDown{3, PeerDownKind::kAborted, "why"}, kKey)), kKey));
  EXPECT_EQ(down.rank, 3u);
  EXPECT_EQ(down.kind, PeerDownKind::kAborted);
  EXPECT_EQ(down.reason, "why");
  const auto admitted =
      std::get<Admitted>(decode(bytesOf(encode(Admitted{3, 8, 4141, "node-a", "node-a/boot"}, kKey)), kKey));
  EXPECT_EQ(admitted.joined, 3u);
  EXPECT_EQ(admitted.worldSize, 8u);
  EXPECT_EQ(admitted.pid, 4141u);
  EXPECT_EQ(admitted.hostname, "node-a");
  EXPECT_EQ(admitted.hostId, "node-a/boot");
}

TEST(Wire, EveryTruncationIsMalformed) {
  const std::string bytes = encode(sampleHello(), kKey);
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_THROW(decode(bytesOf(bytes.substr(0, size)), kKey), MalformedMessage) << "size " << size;
  }
}

TEST(Wire, RandomCorruptionNeverEscapesAsAnythingButMalformedMessage) {
  std::mt19937 rng(7);
  const std::vector<std::string> samples = {
      encode(sampleHello(), kKey), encode(StoreRequest{StoreRequest::Op::kSet, 1, {"k"}, "v", 0, 0}, kKey),
      encode(Welcome{{PeerInfo{0, "h", "id", {"tcp://a:1", "ipc://@b"}}}, true}, kKey),
      encode(Reject{2, "reason"}, kKey)};
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = samples[static_cast<std::size_t>(round) % samples.size()];
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    try {
      decode(bytesOf(bytes), kKey);
    } catch (const MalformedMessage&) {
    }
  }
  for (int round = 0; round < 5000; ++round) {
    std::string junk(rng() % 64, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    if (junk.size() >= 4) junk.replace(0, 4, "HPUR");
    if (junk.size() >= 5) junk[4] = 1;
    try {
      decode(bytesOf(junk), kKey);
    } catch (const MalformedMessage&) {
    }
  }
}

// Found by fuzz_control_message: a Hello or Welcome shorter than its
// envelope plus MAC was read from before its start (out of bounds).
TEST(Wire, HelloOrWelcomeShorterThanItsEnvelopeAndMacIsMalformed) {
  for (const std::uint8_t type : {1, 3}) {
    for (std::size_t size = 6; size < 6 + 32; ++size) {
      std::string bytes = std::string("HPUR") + '\x02' + static_cast<char>(type);
      bytes.resize(size, '\0');
      try {
        decode(bytesOf(bytes), kKey);
        ADD_FAILURE() << size << " bytes decoded";
      } catch (const MalformedMessage& e) {
        EXPECT_STREQ(e.what(), "too short for its envelope and MAC") << size << " bytes";
      }
    }
  }
}

TEST(Wire, HugeDeclaredLengthsAreRejectedBeforeAllocating) {
  WireWriter w;
  w.u32(0xffffffffu);
  const std::string bytes = w.take();
  WireReader r(bytesOf(bytes));
  EXPECT_THROW(r.str(1 << 20), MalformedMessage);
}

}  // namespace
}  // namespace hpu::comm::detail
