// TCP links between ranks of different nodes (comm/src/tcp/tcp_links.h),
// ranks as threads on loopback: messages of every size arrive whole and in
// order, plain and encrypted; two ranks sending megabytes to each other at
// once do not block each other; the handshake refuses a peer without the
// job's key and drops a stray connection; a frame over the limit, a
// tampered ciphertext and a closed connection break the link; payloads a
// receiver expects are read into its memory; posted messages go out on
// every link that has room and can be made to own their bytes.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "../../comm/src/tcp/link_handshake.h"
#include "../../comm/src/tcp/tcp_links.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

using namespace std::chrono_literals;
using Deadline = TcpLinks::Deadline;

const ResolvedAddress kLoopback{"127.0.0.1", false, true};
constexpr std::size_t kMaxMessage = 8 << 20;

JobToken::Key keyOf(std::uint8_t fill) {
  JobToken::Key key{};
  key.fill(fill);
  return key;
}

Deadline in(std::chrono::milliseconds d) { return TcpLinks::Clock::now() + d; }
const TcpLinks::Check kNoCheck = [] {};

std::unique_ptr<TcpLinks> makeLinks(int rank, int size, bool encrypt, std::uint8_t key = 7) {
  return std::make_unique<TcpLinks>(kLoopback, TcpLinkOptions{.rank = rank,
                                                              .size = size,
                                                              .key = keyOf(key),
                                                              .encrypt = encrypt,
                                                              .maxMessageBytes = kMaxMessage});
}

// Connects `links` (rank i at index i) to each other, every rank on its own thread.
void connectAll(std::vector<std::unique_ptr<TcpLinks>>& links) {
  std::vector<std::future<void>> done;
  for (std::size_t r = 0; r < links.size(); ++r) {
    std::vector<std::pair<int, std::string>> peers;
    for (std::size_t p = 0; p < links.size(); ++p)
      if (p != r) peers.emplace_back(static_cast<int>(p), links[p]->endpoint());
    done.push_back(std::async(std::launch::async, [&links, r, peers] { links[r]->connect(peers, in(10s), kNoCheck); }));
  }
  for (auto& d : done) d.get();
}

std::unique_ptr<Message> receive(TcpLinks& links, int peer, std::chrono::milliseconds within = 10s) {
  const Deadline deadline = in(within);
  for (;;) {
    if (auto m = links.tryTake(peer)) return m;
    if (TcpLinks::Clock::now() >= deadline) return nullptr;
    links.progress(1ms);
  }
}

std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + static_cast<std::size_t>(seed) * 7) & 0xff);
  return v;
}

class TcpLinksTest : public ::testing::TestWithParam<bool> {};  // encrypted or not

TEST_P(TcpLinksTest, MessagesOfEverySizeArriveWholeAndInOrder) {
  std::vector<std::unique_ptr<TcpLinks>> links;
  for (int r = 0; r < 3; ++r) links.push_back(makeLinks(r, 3, GetParam()));
  connectAll(links);
  const std::vector<std::size_t> sizes{0, 1, 7, 4097, 65536, 1 << 20};
  for (int from = 0; from < 3; ++from)
    for (int to = 0; to < 3; ++to) {
      if (from == to) continue;
      ASSERT_TRUE(links[static_cast<std::size_t>(from)]->linked(to));
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const auto header = pattern(std::min<std::size_t>(sizes[i], 40), from);
        const auto payload = pattern(sizes[i], static_cast<int>(i));
        links[static_cast<std::size_t>(from)]->send(to, header, payload, in(10s), kNoCheck);
      }
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        auto m = receive(*links[static_cast<std::size_t>(to)], from);
        ASSERT_NE(m, nullptr) << from << " -> " << to << " message " << i;
        auto want = pattern(std::min<std::size_t>(sizes[i], 40), from);
        const auto payload = pattern(sizes[i], static_cast<int>(i));
        want.insert(want.end(), payload.begin(), payload.end());
        ASSERT_EQ(std::vector<std::byte>(m->bytes().begin(), m->bytes().end()), want)
            << from << " -> " << to << " message " << i;
      }
    }
}

// Both ends send 16 MiB in 2 MiB messages before either reads: far more than
// the sockets buffer. Each send reads what arrives while it waits for room.
TEST_P(TcpLinksTest, TwoRanksSendingToEachOtherAtOnceDoNotBlock) {
  std::vector<std::unique_ptr<TcpLinks>> links;
  for (int r = 0; r < 2; ++r) links.push_back(makeLinks(r, 2, GetParam()));
  connectAll(links);
  const auto side = [&](int me) {
    const int other = 1 - me;
    for (int i = 0; i < 8; ++i) links[static_cast<std::size_t>(me)]->send(other, {}, pattern(2 << 20, i), in(20s), kNoCheck);
    for (int i = 0; i < 8; ++i) {
      auto m = receive(*links[static_cast<std::size_t>(me)], other);
      if (!m || m->bytes().size() != (2u << 20) || std::memcmp(m->bytes().data(), pattern(2 << 20, i).data(), 2 << 20) != 0)
        return false;
    }
    return true;
  };
  auto a = std::async(std::launch::async, side, 0);
  auto b = std::async(std::launch::async, side, 1);
  EXPECT_TRUE(a.get());
  EXPECT_TRUE(b.get());
}

// Payloads the receiver expects land in its memory when the frame fits
// (plain links); a frame of another size, or on an encrypted link, arrives
// in a buffer of its own as always.
TEST_P(TcpLinksTest, ExpectedPayloadsArePlacedWhereTheReceiverSaid) {
  const bool encrypted = GetParam();
  std::vector<std::unique_ptr<TcpLinks>> links;
  for (int r = 0; r < 2; ++r) links.push_back(makeLinks(r, 2, encrypted));
  connectAll(links);
  // A frame longer and one shorter than expected (the second read into its
  // place runs on into the next frame) arrive whole in buffers of their own.
  const std::vector<std::size_t> sent{100000, 60, 20, 3 << 20, 0};
  const std::vector<std::size_t> expected{100000, 50, 50, 3 << 20, 0};
  std::vector<std::vector<std::byte>> destinations;
  for (std::size_t size : expected) destinations.emplace_back(size, std::byte{0});
  for (auto& destination : destinations) links[0]->expect(1, 8, destination);
  for (std::size_t i = 0; i < sent.size(); ++i) {
    links[1]->send(0, pattern(8, 1), pattern(sent[i], static_cast<int>(i)), in(10s), kNoCheck);
  }
  for (std::size_t i = 0; i < sent.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "message " << i);
    auto m = receive(*links[0], 1);
    ASSERT_NE(m, nullptr);
    const auto payload = pattern(sent[i], static_cast<int>(i));
    if (!encrypted && sent[i] == expected[i]) {
      ASSERT_TRUE(m->placedPayload().has_value());
      EXPECT_EQ(m->placedPayload()->data(), destinations[i].data());
      EXPECT_EQ(std::vector<std::byte>(m->bytes().begin(), m->bytes().end()), pattern(8, 1));
      EXPECT_EQ(destinations[i], payload);
    } else {
      EXPECT_FALSE(m->placedPayload().has_value());
      auto whole = pattern(8, 1);
      whole.insert(whole.end(), payload.begin(), payload.end());
      EXPECT_EQ(std::vector<std::byte>(m->bytes().begin(), m->bytes().end()), whole);
    }
  }
}

// An expectation describes the next message not received yet, even one that
// arrived before it (which then stays in its buffer); once forgotten,
// nothing more is written where it pointed, and a frame that was being
// read there arrives whole.
TEST_P(TcpLinksTest, ExpectationsFollowTheMessagesOrderAndAreForgotten) {
  std::vector<std::unique_ptr<TcpLinks>> links;
  for (int r = 0; r < 2; ++r) links.push_back(makeLinks(r, 2, GetParam()));
  connectAll(links);
  links[1]->send(0, pattern(8, 1), pattern(5000, 1), in(10s), kNoCheck);
  links[0]->progress(100ms);  // it is in the socket's buffer: read at once
  std::vector<std::byte> early(5000, std::byte{0}), forgotten(4 << 20, std::byte{0});
  links[0]->expect(1, 8, early);      // the message that has arrived already
  links[0]->expect(1, 8, forgotten);  // the next one
  std::thread sender([&] { links[1]->send(0, pattern(8, 2), pattern(4 << 20, 2), in(10s), kNoCheck); });
  links[0]->progress(10ms);
  links[0]->forgetExpectations();
  const std::vector<std::byte> afterForgetting = forgotten;
  auto first = receive(*links[0], 1);
  auto second = receive(*links[0], 1);
  sender.join();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_FALSE(first->placedPayload().has_value());
  EXPECT_EQ(first->bytes().size(), 8u + 5000u);
  EXPECT_EQ(early, std::vector<std::byte>(5000, std::byte{0}));
  EXPECT_FALSE(second->placedPayload().has_value());
  auto whole = pattern(8, 2);
  const auto payload = pattern(4 << 20, 2);
  whole.insert(whole.end(), payload.begin(), payload.end());
  EXPECT_EQ(std::vector<std::byte>(second->bytes().begin(), second->bytes().end()), whole);
  EXPECT_EQ(forgotten, afterForgetting);
}

// Posted messages are written to whichever link has room: rank 2 receives
// all of its 8 MiB while rank 1 reads nothing of its own 8 MiB, far more
// than the sockets buffer; a send after posts to the same peer follows them.
TEST_P(TcpLinksTest, PostedMessagesToOnePeerDoNotWaitForAnotherThatDoesNotRead) {
  std::vector<std::unique_ptr<TcpLinks>> links;
  for (int r = 0; r < 3; ++r) links.push_back(makeLinks(r, 3, GetParam()));
  connectAll(links);
  std::vector<std::vector<std::byte>> payloads;
  for (int i = 0; i < 8; ++i) payloads.push_back(pattern(1 << 20, i));
  for (int to : {1, 2})
    for (const auto& payload : payloads) links[0]->post(to, pattern(8, to), payload);
  std::promise<void> rank2Done;
  std::thread flusher([&] {
    links[0]->flush(in(20s), kNoCheck);
    links[0]->send(1, pattern(8, 9), pattern(100, 9), in(20s), kNoCheck);
  });
  const auto receivesAll = [&](int me, std::size_t count) {
    std::vector<std::vector<std::byte>> got;
    for (std::size_t i = 0; i < count; ++i) {
      auto m = receive(*links[static_cast<std::size_t>(me)], 0);
      if (!m) break;
      got.emplace_back(m->bytes().begin(), m->bytes().end());
    }
    return got;
  };
  const auto withHeader = [](std::vector<std::byte> header, const std::vector<std::byte>& payload) {
    header.insert(header.end(), payload.begin(), payload.end());
    return header;
  };
  const auto at2 = receivesAll(2, payloads.size());
  ASSERT_EQ(at2.size(), payloads.size());
  for (std::size_t i = 0; i < payloads.size(); ++i) EXPECT_EQ(at2[i], withHeader(pattern(8, 2), payloads[i])) << i;
  const auto at1 = receivesAll(1, payloads.size() + 1);
  flusher.join();
  ASSERT_EQ(at1.size(), payloads.size() + 1);
  for (std::size_t i = 0; i < payloads.size(); ++i) EXPECT_EQ(at1[i], withHeader(pattern(8, 1), payloads[i])) << i;
  EXPECT_EQ(at1.back(), withHeader(pattern(8, 9), pattern(100, 9)));
}

// tryTake alone reads: a message that is there is taken without a poll,
// and while it looks for one it writes the messages this rank queued (here
// 8 MiB that rank 1 must read before it answers, far more than the sockets
// buffer).
TEST_P(TcpLinksTest, TryTakeReadsWhatHasArrivedAndWritesWhatIsQueued) {
  std::vector<std::unique_ptr<TcpLinks>> links;
  for (int r = 0; r < 2; ++r) links.push_back(makeLinks(r, 2, GetParam()));
  connectAll(links);
  const auto takeWithoutPolling = [](TcpLinks& l, int peer) {
    const Deadline deadline = in(10s);
    std::unique_ptr<Message> m;
    while (!(m = l.tryTake(peer)) && TcpLinks::Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    return m;
  };
  links[1]->send(0, pattern(8, 1), pattern(65536, 1), in(10s), kNoCheck);
  links[1]->send(0, pattern(8, 2), pattern(10, 2), in(10s), kNoCheck);
  for (int i : {1, 2}) {
    auto m = takeWithoutPolling(*links[0], 1);
    ASSERT_NE(m, nullptr) << i;
    auto want = pattern(8, i);
    const auto payload = pattern(i == 1 ? 65536 : 10, i);
    want.insert(want.end(), payload.begin(), payload.end());
    EXPECT_EQ(std::vector<std::byte>(m->bytes().begin(), m->bytes().end()), want) << i;
  }

  std::vector<std::vector<std::byte>> payloads;
  for (int i = 0; i < 8; ++i) payloads.push_back(pattern(1 << 20, i));
  for (const auto& payload : payloads) links[0]->post(1, {}, payload);
  std::thread answerer([&] {
    for (std::size_t i = 0; i < payloads.size(); ++i) {
      auto m = receive(*links[1], 0);
      if (!m || std::vector<std::byte>(m->bytes().begin(), m->bytes().end()) != payloads[i]) return;
    }
    links[1]->send(0, {}, pattern(4, 3), in(10s), kNoCheck);
  });
  auto answer = takeWithoutPolling(*links[0], 1);
  answerer.join();
  ASSERT_NE(answer, nullptr) << "rank 1 did not get all 8 MiB, or rank 0 did not read its answer";
  EXPECT_EQ(std::vector<std::byte>(answer->bytes().begin(), answer->bytes().end()), pattern(4, 3));
}

// After ownPosted the caller's memory may go: the queued messages, the one
// being written included, arrive as they were posted.
TEST_P(TcpLinksTest, PostedMessagesOwnTheirBytesOnceAsked) {
  std::vector<std::unique_ptr<TcpLinks>> links;
  for (int r = 0; r < 2; ++r) links.push_back(makeLinks(r, 2, GetParam()));
  connectAll(links);
  auto first = std::make_unique<std::vector<std::byte>>(pattern(4 << 20, 1));
  auto second = std::make_unique<std::vector<std::byte>>(pattern(3 << 20, 2));
  links[0]->post(1, pattern(8, 1), *first);
  links[0]->post(1, pattern(8, 2), *second);
  links[0]->ownPosted();
  std::fill(first->begin(), first->end(), std::byte{0});
  first.reset();
  second.reset();
  std::thread flusher([&] { links[0]->flush(in(20s), kNoCheck); });
  for (int i = 1; i <= 2; ++i) {
    auto m = receive(*links[1], 0);
    ASSERT_NE(m, nullptr) << i;
    auto want = pattern(8, i);
    const auto payload = pattern(i == 1 ? 4 << 20 : 3 << 20, i);
    want.insert(want.end(), payload.begin(), payload.end());
    EXPECT_EQ(std::vector<std::byte>(m->bytes().begin(), m->bytes().end()), want) << i;
  }
  flusher.join();
}

// flush fails only for messages a broken link dropped: a peer that read
// everything and left is no failure; one that left with 32 MiB unread is
// (the caller's check, the job's health, says why).
TEST_P(TcpLinksTest, FlushFailsOnlyForMessagesABrokenLinkDropped) {
  std::vector<std::unique_ptr<TcpLinks>> links;
  for (int r = 0; r < 3; ++r) links.push_back(makeLinks(r, 3, GetParam()));
  connectAll(links);
  const auto payload = pattern(1 << 20, 1);
  links[0]->post(1, pattern(8, 1), payload);
  ASSERT_NE(receive(*links[1], 0), nullptr);
  links[1].reset();  // read it all, then left
  struct Lost {};
  const TcpLinks::Check lost = [] { throw Lost{}; };
  for (int i = 0; i < 100 && !links[0]->broken(1); ++i) links[0]->progress(10ms);
  ASSERT_TRUE(links[0]->broken(1));
  EXPECT_NO_THROW(links[0]->flush(in(10s), lost));
  for (int i = 0; i < 32; ++i) links[0]->post(2, pattern(8, 2), payload);  // more than the sockets buffer
  links[2].reset();  // left with it unread
  EXPECT_THROW(links[0]->flush(in(10s), lost), Lost);
}

INSTANTIATE_TEST_SUITE_P(PlainAndEncrypted, TcpLinksTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "encrypted" : "plain"; });

TEST(TcpLinks, APeerWithoutTheJobsKeyFailsTheHandshake) {
  auto good = makeLinks(0, 2, false, 7);
  auto stranger = makeLinks(1, 2, false, 8);
  auto connector = std::async(std::launch::async, [&] { good->connect({{1, stranger->endpoint()}}, in(5s), kNoCheck); });
  auto acceptor = std::async(std::launch::async, [&] { stranger->connect({{0, good->endpoint()}}, in(5s), kNoCheck); });
  try {
    connector.get();
    FAIL() << "rank 0 linked to a peer without the key";
  } catch (const RendezvousError& e) {
    EXPECT_STREQ(e.what(),
                 "rank 0: rank 1 failed the data link handshake: it does not hold this job's token (HPU_JOB_TOKEN)");
  }
  EXPECT_THROW(acceptor.get(), RendezvousError);
}

TEST(TcpLinks, AStrayConnectionIsDroppedAndTheRanksStillLink) {
  std::vector<std::unique_ptr<TcpLinks>> links;
  for (int r = 0; r < 2; ++r) links.push_back(makeLinks(r, 2, false));
  // Something else connects to rank 1's port and says something that is not a hello.
  const int stray = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(links[1]->endpoint().substr(links[1]->endpoint().rfind(':') + 1))));
  ASSERT_EQ(::connect(stray, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  const std::string junk(48, 'x');
  ASSERT_EQ(::send(stray, junk.data(), junk.size(), 0), 48);
  connectAll(links);
  links[0]->send(1, {}, pattern(10, 1), in(5s), kNoCheck);
  EXPECT_NE(receive(*links[1], 0), nullptr);
  ::close(stray);
}

TEST(TcpLinks, AMissingPeerIsNamedAtTheDeadline) {
  auto lonely = makeLinks(1, 3, false);
  try {
    lonely->connect({{0, "tcp://127.0.0.1:1"}}, in(300ms), kNoCheck);  // rank 0 never connects
    FAIL() << "linked to nobody";
  } catch (const RendezvousError& e) {
    EXPECT_STREQ(e.what(), "rank 1: no data link to rank 0 before HPU_RENDEZVOUS_TIMEOUT");
  }
}

// A raw peer that completes the handshake, then misbehaves.
class RawPeer {
 public:
  // Connects to `links` (rank 1) as rank 0 with `key`, encrypting as `links` does.
  RawPeer(TcpLinks& links, std::uint8_t key, bool encrypt = false) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(links.endpoint().substr(links.endpoint().rfind(':') + 1))));
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
    auto accepting = std::async(std::launch::async, [&] { links.connect({{0, "tcp://127.0.0.1:1"}}, in(5s), kNoCheck); });
    const LinkHello mine = makeLinkHello(0, 1);
    const auto hello = encodeLinkHello(mine);
    write(hello);
    std::vector<std::byte> answer(kLinkHelloBytes + 32 + (encrypt ? crypto_secretstream_xchacha20poly1305_HEADERBYTES : 0));
    read(answer);
    const auto theirs = decodeLinkHello(std::span(answer).first(kLinkHelloBytes));
    const LinkSecrets secrets = deriveLinkSecrets(keyOf(key), mine, *theirs);
    std::vector<std::byte> proof(secrets.connector_proof.begin(), secrets.connector_proof.end());
    if (encrypt) {
      std::array<unsigned char, crypto_secretstream_xchacha20poly1305_HEADERBYTES> header{};
      crypto_secretstream_xchacha20poly1305_init_push(&push_, header.data(), secrets.connector_to_acceptor.data());
      for (unsigned char b : header) proof.push_back(static_cast<std::byte>(b));
    }
    write(proof);
    accepting.get();
  }
  // One encrypted frame holding `text`, with a byte of its ciphertext flipped if `tamper`.
  void sendEncrypted(const std::string& text, bool tamper) {
    std::vector<unsigned char> frame(4 + text.size() + crypto_secretstream_xchacha20poly1305_ABYTES);
    const auto length = static_cast<std::uint32_t>(frame.size() - 4);
    std::memcpy(frame.data(), &length, 4);
    crypto_secretstream_xchacha20poly1305_push(&push_, frame.data() + 4, nullptr,
                                               reinterpret_cast<const unsigned char*>(text.data()), text.size(),
                                               nullptr, 0, 0);
    if (tamper) frame[5] ^= 1;
    write(frame);
  }
  ~RawPeer() { ::close(fd_); }
  template <class Bytes>
  void write(const Bytes& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  template <class Bytes>
  void read(Bytes& bytes) {
    std::size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = ::recv(fd_, bytes.data() + got, bytes.size() - got, 0);
      ASSERT_GT(n, 0);
      got += static_cast<std::size_t>(n);
    }
  }
  void close() {
    ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  crypto_secretstream_xchacha20poly1305_state push_{};
};

TEST(TcpLinks, EncryptedMessagesAreAuthenticated) {
  auto links = makeLinks(1, 2, true);
  RawPeer peer(*links, 7, /*encrypt=*/true);
  peer.sendEncrypted("intact", false);
  auto m = receive(*links, 0);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->bytes().data()), m->bytes().size()), "intact");
  peer.sendEncrypted("changed on the way", true);
  EXPECT_EQ(receive(*links, 0, 300ms), nullptr);
  EXPECT_TRUE(links->broken(0));
}

TEST(TcpLinks, AFrameOverTheLimitOrAClosedConnectionBreaksTheLink) {
  auto links = makeLinks(1, 2, false);
  {
    RawPeer peer(*links, 7);
    const std::uint32_t huge = kMaxMessage + 1;
    std::array<std::byte, 4> length{};
    std::memcpy(length.data(), &huge, 4);  // little-endian host
    peer.write(length);
    EXPECT_EQ(receive(*links, 0, 300ms), nullptr);
    EXPECT_TRUE(links->broken(0));
  }
  auto again = makeLinks(1, 2, false);
  RawPeer peer(*again, 7);
  const std::array<std::byte, 6> frame{std::byte{2}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{'o'}, std::byte{'k'}};
  peer.write(frame);
  auto m = receive(*again, 0);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->bytes().size(), 2u);
  EXPECT_FALSE(again->broken(0));
  peer.close();
  EXPECT_EQ(receive(*again, 0, 300ms), nullptr);
  EXPECT_TRUE(again->broken(0));
}

TEST(TcpLinks, TheHandshakeDerivesOneKeyPerDirectionThatBothEndsAgreeOn) {
  const LinkHello c = makeLinkHello(0, 1), a = makeLinkHello(1, 0);
  const LinkSecrets one = deriveLinkSecrets(keyOf(7), c, a), two = deriveLinkSecrets(keyOf(7), c, a);
  EXPECT_TRUE(sameProof(one.connector_proof, two.connector_proof));
  EXPECT_EQ(one.connector_to_acceptor, two.connector_to_acceptor);
  EXPECT_NE(one.connector_to_acceptor, one.acceptor_to_connector);
  EXPECT_FALSE(sameProof(one.connector_proof, one.acceptor_proof));
  // Another nonce, another key: a recorded handshake does not replay.
  EXPECT_NE(deriveLinkSecrets(keyOf(7), makeLinkHello(0, 1), a).connector_to_acceptor, one.connector_to_acceptor);
  EXPECT_FALSE(decodeLinkHello(std::vector<std::byte>(kLinkHelloBytes, std::byte{'x'})).has_value());
}

}  // namespace
}  // namespace hpu::comm::detail
