// The control protocol's codec: round trips, MACs, and hostile input (every
// truncation and random corruption either decodes or raises
// MalformedMessage; nothing crashes or reads out of bounds).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "../../comm/src/wire/codec.h"
#include "../../comm/src/wire/control_messages.h"
#include "hpu/comm/job_token.h"
#include "sample_messages.h"

namespace hpu::comm::detail {
namespace {

using test_support::sampleHello;
using test_support::samplePeerTable;

const JobToken::Key kKey = JobToken::fromEnv({{"HPU_JOB_TOKEN", "wire-test-token-0123456789"}}).derive("mac");
const JobToken::Key kOtherKey = JobToken::fromEnv({{"HPU_JOB_TOKEN", "other-test-token-0123456789"}}).derive("mac");

std::span<const std::byte> bytesOf(const std::string& s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

TEST(Wire, HelloRoundTripsAndItsMacNeedsTheSameToken) {
  const std::string bytes = encode(sampleHello(), kKey);
  const auto decoded = std::get<Hello>(decode(bytesOf(bytes), kKey));
  EXPECT_TRUE(decoded.authentic);
  EXPECT_EQ(decoded.rank, 5u);
  EXPECT_EQ(decoded.config.entries, sampleHello().config.entries);
  EXPECT_EQ(decoded.endpoints.tcpHost, "10.0.0.2");
  EXPECT_EQ(decoded.endpoints.tcpPort, 41000u);
  EXPECT_EQ(decoded.endpoints.ipcPid, 4242u);
  EXPECT_EQ(decoded.endpoints.ipcNonce, 0x0123456789abcdefu);
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
  const auto left = std::get<PeersLeft>(decode(bytesOf(encode(PeersLeft{{3, 9, 4095}}, kKey)), kKey));
  EXPECT_EQ(left.ranks, (std::vector<std::uint32_t>{3, 9, 4095}));
  const auto admitted =
      std::get<Admitted>(decode(bytesOf(encode(Admitted{3, 8, 4141, "node-a", "node-a/boot"}, kKey)), kKey));
  EXPECT_EQ(admitted.joined, 3u);
  EXPECT_EQ(admitted.worldSize, 8u);
  EXPECT_EQ(admitted.pid, 4141u);
  EXPECT_EQ(admitted.hostname, "node-a");
  EXPECT_EQ(admitted.hostId, "node-a/boot");
}

TEST(Wire, EveryTruncationIsMalformed) {
  for (const std::string& bytes : {encode(sampleHello(), kKey), encode(Welcome{samplePeerTable(), true}, kKey)}) {
    for (std::size_t size = 0; size < bytes.size(); ++size) {
      EXPECT_THROW(decode(bytesOf(bytes.substr(0, size)), kKey), MalformedMessage) << "size " << size;
    }
  }
}

// The peer table lists each node once and each rank in 18 bytes.
TEST(Wire, PeerTableRoundTripsWithEachNodeOnceAndEighteenBytesPerRank) {
  const std::string bytes = encode(Welcome{samplePeerTable(), true}, kKey);
  const auto decoded = std::get<Welcome>(decode(bytesOf(bytes), kKey));
  EXPECT_TRUE(decoded.authentic);
  EXPECT_EQ(decoded.peers, samplePeerTable());
  EXPECT_EQ(decoded.peers.nodeOf(2).hostId, "node-b/boot");
  // Envelope, node count, nodes, rank count, ranks, MAC.
  const std::size_t nodeBytes = 2 * (4 + 2 * 4) + std::string("node-a/boot10.0.0.1").size() * 2;
  EXPECT_EQ(bytes.size(), 6 + 4 + nodeBytes + 4 + 4 * 18 + 32);
  // A world of 4,096 ranks on 512 nodes of 8: the ranks' part grows by 18 bytes a rank.
  PeerTable big;
  for (std::uint32_t n = 0; n < 512; ++n) big.nodes.push_back({n, "node/boot", "10.0.0.1"});
  for (std::uint32_t r = 0; r < 4096; ++r) big.ranks.push_back({r / 8, 41000, r, r});
  const std::string bigBytes = encode(Welcome{big, true}, kKey);
  EXPECT_EQ(bigBytes.size(), 6 + 4 + 512 * (4 + 2 * 4 + 9 + 8) + 4 + 4096 * 18 + 32);
  EXPECT_EQ(std::get<Welcome>(decode(bytesOf(bigBytes), kKey)).peers, big);
}

TEST(Wire, PeerTableOfHellosListsEachNodeOnce) {
  std::vector<Hello> hellos(4, sampleHello());
  hellos[2].nodeRank = hellos[3].nodeRank = 2;  // a second node on the same machine
  hellos[3].endpoints = {"10.0.0.2", 41003, 77, 9};
  std::vector<const Hello*> pointers;
  for (const Hello& h : hellos) pointers.push_back(&h);
  const PeerTable table = PeerTable::of(pointers);
  ASSERT_EQ(table.nodes.size(), 2u);
  EXPECT_EQ(table.nodes[1], (PeerNode{2, "node-b/boot", "10.0.0.2"}));
  EXPECT_EQ(table.ranks[3], (PeerEntry{1, 41003, 77, 9}));
  EXPECT_EQ(table.ranks[1].node, 0u);
}

// A table signed with another job's token, or changed on the way, decodes
// but is not authentic (the client refuses it: control_client_test.cc).
TEST(Wire, PeerTableMacNeedsTheSameTokenAndUntouchedBytes) {
  const std::string bytes = encode(Welcome{samplePeerTable(), true}, kKey);
  EXPECT_FALSE(std::get<Welcome>(decode(bytesOf(bytes), kOtherKey)).authentic);
  std::string tampered = bytes;
  tampered[bytes.size() - 32 - 1] ^= 1;  // the last rank's nonce
  const auto decoded = std::get<Welcome>(decode(bytesOf(tampered), kKey));
  EXPECT_FALSE(decoded.authentic);
  EXPECT_EQ(decoded.peers.ranks[3].ipcNonce, 0x4444u ^ (std::uint64_t{1} << 56));
}

// Garbled counts and node indices are named; none allocates by a count it was sent.
TEST(Wire, GarbledPeerTablesAndDepartureListsAreMalformedWithTheirReason) {
  const auto expectMalformed = [](const std::string& bytes, const std::string& message) {
    try {
      decode(bytesOf(bytes), kKey);
      ADD_FAILURE() << "decoded; expected: " << message;
    } catch (const MalformedMessage& e) {
      EXPECT_EQ(e.what(), message);
    }
  };
  const std::string bytes = encode(Welcome{samplePeerTable(), true}, kKey);
  const std::size_t body = bytes.size() - 32;
  const std::size_t rankCount = body - 4 * 18 - 4;
  auto withWord = [&](std::size_t offset, std::uint32_t value) {
    std::string b = bytes;
    std::memcpy(b.data() + offset, &value, sizeof value);
    return b;
  };
  expectMalformed(withWord(6, 70'000), "a peer table of 70000 nodes");
  expectMalformed(withWord(rankCount, 70'000), "a peer table of 70000 ranks");
  expectMalformed(withWord(rankCount, 5), "a peer table of 5 ranks needs 90 bytes, 72 are left");
  expectMalformed(withWord(rankCount + 4 + 2 * 18, 7), "rank 2 is on node 7 of a table of 2");
  // One byte short of its MAC: the body loses its last rank's last byte.
  expectMalformed(bytes.substr(0, bytes.size() - 1), "a peer table of 4 ranks needs 72 bytes, 71 are left");
  expectMalformed(bytes.substr(0, body) + '\0' + bytes.substr(body), "1 unexpected trailing bytes");
  const std::string left = encode(PeersLeft{{3, 9}}, kKey);
  expectMalformed(left.substr(0, left.size() - 1), "2 ranks left in 7 bytes");
  std::string many = left;
  const std::uint32_t tooMany = 70'000;
  std::memcpy(many.data() + 6, &tooMany, sizeof tooMany);
  expectMalformed(many, "70000 ranks left");
}

TEST(Wire, RandomCorruptionNeverEscapesAsAnythingButMalformedMessage) {
  std::mt19937 rng(7);
  const std::vector<std::string> samples = {
      encode(sampleHello(), kKey), encode(StoreRequest{StoreRequest::Op::kSet, 1, {"k"}, "v", 0, 0}, kKey),
      encode(Welcome{samplePeerTable(), true}, kKey),
      encode(Reject{2, "reason"}, kKey), encode(PeersLeft{{1, 2, 3}}, kKey)};
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
      std::string bytes = encode(Goodbye{}, kKey).substr(0, 5) + static_cast<char>(type);
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
