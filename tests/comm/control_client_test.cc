// A rank's ControlClient against a scripted rank 0 (a bare ROUTER socket
// on 127.0.0.1): what it accepts as the peer table, and when it judges
// rank 0's silence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <thread>

#include <spdlog/fmt/fmt.h>
#include <zmq.hpp>

#include "../../comm/src/security/job_keys.h"
#include "../../comm/src/zmq/control_client.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/free_port.h"
#include "sample_messages.h"

namespace hpu::comm::detail {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;
using test_support::samplePeerTable;

const JobKeys kKeys(JobToken::fromEnv({{"HPU_JOB_TOKEN", "client-test-token-0123456789"}}));
const JobKeys kOtherKeys(JobToken::fromEnv({{"HPU_JOB_TOKEN", "other-test-token-0123456789"}}));

// Rank 0 as a script: receives, and sends what the test says.
class ScriptedRankZero {
 public:
  ScriptedRankZero() : socket_(context_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind(fmt::format("tcp://127.0.0.1:{}", port_));
  }
  int port() const { return port_; }

  // The next message a client sent within `timeout`, remembering its routing id.
  ControlMessage receive(std::chrono::milliseconds timeout = 5s) {
    socket_.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    zmq::message_t id, body;
    if (!socket_.recv(id) || !socket_.recv(body)) throw std::runtime_error("no message from the client");
    client_ = id.to_string();
    return decode({static_cast<const std::byte*>(body.data()), body.size()}, kKeys.helloMac);
  }
  void send(const ControlMessage& message, const JobKeys& keys = kKeys) {
    const std::string bytes = encode(message, keys.helloMac);
    socket_.send(zmq::buffer(client_), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
  }
  // Receives the hello and admits its rank as the last of `worldSize`.
  void admit(std::uint32_t worldSize) {
    ASSERT_TRUE(std::holds_alternative<Hello>(receive()));
    send(Admitted{worldSize, worldSize, static_cast<std::uint32_t>(::getpid()), "node-a", "node-a/boot"});
  }

 private:
  int port_ = pickFreePort("127.0.0.1");
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string client_;
};

struct Client {
  explicit Client(const ScriptedRankZero& rankZero, std::uint32_t rank, std::uint32_t worldSize,
                  std::chrono::milliseconds peerTimeout = 5s) {
    ClientConfig config;
    config.serverEndpoint = fmt::format("tcp://127.0.0.1:{}", rankZero.port());
    config.displayAddress = fmt::format("127.0.0.1:{}", rankZero.port());
    config.keys = &kKeys;
    config.hello = test_support::sampleHello();
    config.hello.rank = rank;
    config.hello.worldSize = worldSize;
    config.rendezvousTimeout = 10s;
    config.peerTimeout = peerTimeout;
    config.heartbeatInterval = peerTimeout / 5;
    client = std::make_unique<ControlClient>(context, std::move(config), health);
  }
  ~Client() {
    client->dropForTesting();  // no goodbye to wait on
  }
  zmq::context_t context;
  std::shared_ptr<PeerHealth> health = std::make_shared<PeerHealth>(5s);
  std::unique_ptr<ControlClient> client;
};

std::string awaitWelcomeError(ControlClient& client) {
  try {
    client.awaitWelcome(Clock::now() + 5s);
  } catch (const RendezvousError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ControlClient, TakesThePeerTableRankZeroSigned) {
  ScriptedRankZero rankZero;
  Client rank(rankZero, 2, 4);
  rankZero.admit(4);
  rankZero.send(Welcome{samplePeerTable(), true});
  EXPECT_EQ(rank.client->awaitWelcome(Clock::now() + 5s), samplePeerTable());
}

TEST(ControlClient, RefusesAPeerTableSignedWithAnotherToken) {
  ScriptedRankZero rankZero;
  Client rank(rankZero, 2, 4);
  rankZero.admit(4);
  rankZero.send(Welcome{samplePeerTable(), true}, kOtherKeys);
  EXPECT_EQ(awaitWelcomeError(*rank.client),
            fmt::format("rank 2: the process listening on 127.0.0.1:{} is not rank 0 of this job (its peer table is "
                        "not signed with this job's token)",
                        rankZero.port()));
}

TEST(ControlClient, RefusesAPeerTableOfAnotherWorldSize) {
  ScriptedRankZero rankZero;
  Client rank(rankZero, 5, 8);
  rankZero.admit(8);
  rankZero.send(Welcome{samplePeerTable(), true});
  EXPECT_EQ(awaitWelcomeError(*rank.client), "rank 5: rank 0 published 4 peers for a world of 8");
}

TEST(ControlClient, RecordsTheRanksThatLeft) {
  ScriptedRankZero rankZero;
  Client rank(rankZero, 2, 4);
  rankZero.admit(4);
  rankZero.send(Welcome{samplePeerTable(), true});
  rank.client->awaitWelcome(Clock::now() + 5s);
  rankZero.send(PeersLeft{{1, 3}});
  const auto deadline = Clock::now() + 5s;
  while (!rank.health->hasLeft(3) && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(rank.health->hasLeft(1));
  EXPECT_TRUE(rank.health->hasLeft(3));
  EXPECT_FALSE(rank.health->hasLeft(0));
  EXPECT_FALSE(rank.health->firstFailure().has_value());
}

// The table of a large job reaches its last ranks long after they were
// admitted, behind every other rank's copy: rank 0's silence until then is
// not a loss. Once the table is here, it is.
TEST(ControlClient, JudgesRankZerosSilenceOnlyOnceThePeerTableArrived) {
  ScriptedRankZero rankZero;
  constexpr auto kPeerTimeout = 200ms;
  Client rank(rankZero, 2, 4, kPeerTimeout);
  rankZero.admit(4);
  // Three peer timeouts of silence while the client heartbeats.
  int heartbeats = 0;
  for (const auto until = Clock::now() + 3 * kPeerTimeout; Clock::now() < until;) {
    if (std::holds_alternative<Heartbeat>(rankZero.receive())) ++heartbeats;
  }
  EXPECT_GE(heartbeats, 2);
  rankZero.send(Welcome{samplePeerTable(), true});
  EXPECT_EQ(rank.client->awaitWelcome(Clock::now() + 5s), samplePeerTable());
  EXPECT_FALSE(rank.health->firstFailure().has_value());
  // Now silent again: declared lost after the peer timeout (bounded wait).
  const auto deadline = Clock::now() + 10 * kPeerTimeout;
  while (!rank.health->firstFailure() && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  const auto failure = rank.health->firstFailure();
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->rank, 0);
  EXPECT_THAT(failure->reason, HasSubstr(fmt::format("rank 0 lost: no message from rank 0 at 127.0.0.1:{} for ",
                                                     rankZero.port())));
}

}  // namespace
}  // namespace hpu::comm::detail
