// Rank 0's RendezvousServer with real ControlClients sharing one process
// (as the control-plane bench runs them), on 127.0.0.1.
#include <gtest/gtest.h>

#include <unistd.h>

#include <thread>

#include <spdlog/fmt/fmt.h>
#include <zmq.hpp>

#include "../../comm/src/security/job_keys.h"
#include "../../comm/src/zmq/control_client.h"
#include "../../comm/src/zmq/rendezvous_server.h"
#include "hpu/comm/free_port.h"
#include "sample_messages.h"

namespace hpu::comm::detail {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const JobKeys kKeys(JobToken::fromEnv({{"HPU_JOB_TOKEN", "server-test-token-0123456789"}}));

// Departures are reported in batches (PeersLeft), not one message per
// departure to every rank: every rank still learns each one.
TEST(RendezvousServer, EveryRankLearnsWhoLeft) {
  constexpr int kWorld = 6;
  const int port = pickFreePort("127.0.0.1");
  zmq::context_t context;
  const Hello hello = test_support::sampleHello();
  ServerConfig server;
  server.bindEndpoint = fmt::format("tcp://127.0.0.1:{}", port);
  server.displayAddress = fmt::format("127.0.0.1:{}", port);
  server.keys = &kKeys;
  server.worldSize = kWorld;
  server.version = hello.version;
  server.config = hello.config;
  RendezvousServer rankZero(context, server);
  std::vector<std::shared_ptr<PeerHealth>> health;
  std::vector<std::unique_ptr<ControlClient>> clients;
  for (int r = 0; r < kWorld; ++r) {
    ClientConfig config;
    config.serverEndpoint = server.bindEndpoint;
    config.displayAddress = server.displayAddress;
    config.keys = &kKeys;
    config.hello = hello;
    config.hello.rank = static_cast<std::uint32_t>(r);
    config.hello.worldSize = kWorld;
    health.push_back(std::make_shared<PeerHealth>(5s));
    clients.push_back(std::make_unique<ControlClient>(context, std::move(config), health.back()));
  }
  for (auto& c : clients) EXPECT_EQ(c->awaitWelcome(Clock::now() + 10s).ranks.size(), std::size_t{kWorld});
  for (int r = 2; r < kWorld; ++r) clients[static_cast<std::size_t>(r)].reset();  // goodbye
  const auto deadline = Clock::now() + 10s;
  const auto allLeft = [&](const PeerHealth& h) {
    for (int r = 2; r < kWorld; ++r)
      if (!h.hasLeft(r)) return false;
    return true;
  };
  while (!(allLeft(*health[0]) && allLeft(*health[1])) && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  for (int r : {0, 1}) {
    EXPECT_TRUE(allLeft(*health[static_cast<std::size_t>(r)])) << "rank " << r;
    EXPECT_FALSE(health[static_cast<std::size_t>(r)]->firstFailure().has_value()) << "rank " << r;
  }
  clients.clear();
  rankZero.finish(Clock::now() + 5s);
}

}  // namespace
}  // namespace hpu::comm::detail
