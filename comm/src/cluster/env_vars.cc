#include "env_vars.h"

#include <charconv>
#include <limits>

#include <spdlog/fmt/fmt.h>

#include "../check.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {

std::optional<int> optionalCount(const Environment& env, std::string_view name) {
  auto value = env.get(name);
  if (!value) return std::nullopt;
  const std::string& text = *value;
  long long parsed = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size()) {
    throw EnvError(fmt::format("{}='{}' is not a non-negative integer", name, text));
  }
  if (parsed < 0) throw EnvError(fmt::format("{}={} is negative; it must be 0 or more", name, text));
  if (ec == std::errc::result_out_of_range || parsed > std::numeric_limits<int>::max()) {
    throw EnvError(fmt::format("{}={} is too large", name, text));
  }
  return static_cast<int>(parsed);
}

int requiredCount(const Environment& env, std::string_view name, std::string_view environment) {
  auto value = optionalCount(env, name);
  if (!value) throw EnvError(fmt::format("{} is not set; {} needs it", name, environment));
  return *value;
}

std::optional<int> optionalPort(const Environment& env, std::string_view name) {
  auto value = env.get(name);
  if (!value) return std::nullopt;
  long long parsed = 0;
  auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), parsed);
  if (value->empty() || ec != std::errc() || end != value->data() + value->size() || parsed < 1 || parsed > 65535) {
    throw EnvError(fmt::format("{}='{}' is not a TCP port; use a free port in 1..65535", name, *value));
  }
  return static_cast<int>(parsed);
}

std::optional<std::string> optionalNonEmpty(const Environment& env, std::string_view name) {
  auto value = env.get(name);
  if (value && value->empty()) throw EnvError(fmt::format("{} is set but empty", name));
  return value;
}

void checkBelow(std::string_view name, int value, int limit, std::string_view limitName) {
  if (value < limit) return;
  throw EnvError(fmt::format("{}={} is out of range for {}={}; valid values are 0..{}", name, value, limitName, limit,
                             limit - 1));
}

void checkWorldSize(std::string_view name, int worldSize, const Topology& topology, std::string_view hint) {
  const int expected = topology.numNodes * topology.devicesPerNode;
  if (worldSize == expected) return;
  std::string message = fmt::format(
      "{}={} disagrees with trainer.num_nodes={} x trainer.devices={} = {} processes ({} counts processes, not nodes)",
      name, worldSize, topology.numNodes, topology.devicesPerNode, expected, name);
  if (!hint.empty()) message += fmt::format("; {}", hint);
  throw EnvError(message);
}

void checkTopology(const Topology& topology) {
  HPU_COMM_CHECK(topology.devicesPerNode >= 1 && topology.numNodes >= 1,
                 "Topology needs devicesPerNode >= 1 and numNodes >= 1 (the trainer validates them)");
}

}  // namespace hpu::comm::detail

namespace hpu::comm::detail {

ClusterInfo resolveGloballyNumbered(const Environment& env, const Topology& topology, const RankVariables& vars) {
  checkTopology(topology);
  ClusterInfo info;
  info.environment = std::string(vars.environment);
  info.createsProcessesExternally = true;
  info.numNodes = topology.numNodes;
  info.localWorldSize = topology.devicesPerNode;
  info.worldSize = requiredCount(env, vars.worldSize, vars.environment);
  checkWorldSize(vars.worldSize, info.worldSize, topology, vars.launchHint);
  info.globalRank = requiredCount(env, vars.rank, vars.environment);
  checkBelow(vars.rank, info.globalRank, info.worldSize, vars.worldSize);
  info.localRank = requiredCount(env, vars.localRank, vars.environment);
  checkBelow(vars.localRank, info.localRank, topology.devicesPerNode, "trainer.devices");
  if (info.localRank != info.globalRank % topology.devicesPerNode) {
    throw EnvError(fmt::format(
        "{}={} with {}={} and trainer.devices={} is not a by-node placement (expected local rank {}); {}",
        vars.localRank, info.localRank, vars.rank, info.globalRank, topology.devicesPerNode,
        info.globalRank % topology.devicesPerNode, vars.launchHint));
  }
  info.nodeRank = info.globalRank / topology.devicesPerNode;

  if (auto addr = optionalNonEmpty(env, "MASTER_ADDR")) {
    info.masterAddr = *addr;
  } else if (topology.numNodes > 1) {
    throw EnvError(fmt::format("MASTER_ADDR is not set; {} needs it on every node, set to the host of rank 0",
                               vars.environment));
  }
  if (auto port = optionalPort(env, "MASTER_PORT")) {
    info.masterPort = *port;
  } else if (info.worldSize > 1) {
    throw EnvError(fmt::format("MASTER_PORT is not set; {} needs the same free port on every process",
                               vars.environment));
  }
  return info;
}

}  // namespace hpu::comm::detail
