// The rendezvous / control protocol between every rank's ControlClient and
// rank 0's RendezvousServer (one DEALER -> ROUTER connection per rank).
//
// Envelope: u32 magic 'HPUR' | u8 protocol version (3) | u8 type | body.
// Hello and Welcome end with an HMAC-SHA256 of everything before it, keyed
// with JobKeys::helloMac, so rank 0 admits only token holders and ranks
// accept a peer table only from a rank 0 that holds the token too.
//
//   client -> server: Hello, Heartbeat(activity), StoreRequest, Abort(reason), Goodbye
//   server -> client: Admitted(joined, world, rank 0's process), Welcome(peer table), Reject(offender, reason),
//                     Heartbeat, StoreReply, PeerDown(rank, kind, reason), PeersLeft(ranks), Shutdown
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "hpu/comm/config_fingerprint.h"
#include "hpu/comm/job_token.h"

namespace hpu::comm::detail {

// Where a rank's data plane listens: its TCP listener (the address its
// node's ranks share, and its own port) and its ipc socket, which the
// transport names from the rank's process id and a random nonce. Everything
// but the host is of fixed size, so the peer table carries it without a
// string per rank.
struct Endpoints {
  std::string tcpHost;  // numeric: "10.0.0.2" or "::1"
  std::uint16_t tcpPort = 0;
  std::uint32_t ipcPid = 0;
  std::uint64_t ipcNonce = 0;
};

struct Hello {
  std::uint32_t rank = 0;
  std::uint32_t worldSize = 0;
  std::uint32_t nodeRank = 0;
  std::uint32_t localRank = 0;
  std::uint32_t pid = 0;
  std::string version;
  std::array<std::uint8_t, 32> configDigest{};
  ConfigFingerprint config;
  std::string hostname;
  std::string hostId;  // hostname + kernel boot id: equal ids share ipc://
  Endpoints endpoints;
  bool authentic = false;  // set by decode: the MAC matched this job's token
};

// The peer table rank 0 publishes once every rank joined. Each node (the
// ranks of one NODE_RANK on one machine, listening on one address) is listed
// once; each rank is its node's index and the fixed-size part of its
// endpoints, 18 bytes on the wire, decoded without allocating per rank.
struct PeerNode {
  std::uint32_t nodeRank = 0;
  std::string hostId;  // equal ids share ipc://
  std::string tcpHost;
  bool operator==(const PeerNode&) const = default;
};

struct PeerEntry {
  std::uint32_t node = 0;  // index into PeerTable::nodes (decode checks it)
  std::uint16_t tcpPort = 0;
  std::uint32_t ipcPid = 0;
  std::uint64_t ipcNonce = 0;
  bool operator==(const PeerEntry&) const = default;
};

struct PeerTable {
  std::vector<PeerNode> nodes;
  std::vector<PeerEntry> ranks;  // indexed by rank
  bool operator==(const PeerTable&) const = default;

  const PeerNode& nodeOf(std::size_t rank) const { return nodes[ranks[rank].node]; }
  // The table of ranks whose Hellos these are, in rank order: one node per
  // distinct (node rank, host id, TCP host).
  static PeerTable of(const std::vector<const Hello*>& hellos);
};

struct Admitted {
  std::uint32_t joined = 0;
  std::uint32_t worldSize = 0;
  // Rank 0's process (the server's), for a rank that finds rank 0 silent
  // to tell a dead rank 0 from a frozen or slow one on its own host.
  std::uint32_t pid = 0;
  std::string hostname;
  std::string hostId;
};

struct Welcome {
  PeerTable peers;
  bool authentic = false;
};

struct Reject {
  std::int32_t offender = -1;  // the rank at fault, or -1 (timeout, job-wide)
  std::string reason;
};

struct Heartbeat {
  std::string activity;  // client -> server: what the rank is doing
};

struct StoreRequest {
  enum class Op : std::uint8_t { kSet, kGet, kAdd, kWait };
  Op op = Op::kSet;
  std::uint64_t id = 0;
  std::vector<std::string> keys{};  // one key, except for kWait
  std::string value{};              // kSet
  std::int64_t delta = 0;           // kAdd
  std::uint64_t timeoutMs = 0;      // kGet / kWait
};

struct StoreReply {
  enum class Status : std::uint8_t { kOk, kTimeout, kError };
  std::uint64_t id = 0;
  Status status = Status::kOk;
  std::string value;  // kOk: the value (get) or decimal result (add); kError: the message
};

enum class PeerDownKind : std::uint8_t { kLost, kAborted, kLeft };

struct PeerDown {
  std::uint32_t rank = 0;
  PeerDownKind kind = PeerDownKind::kLost;
  std::string reason;
};

// Ranks that left the job cleanly since rank 0's last such report: when a
// job ends, every rank leaves at once, and one report per departure to
// every rank would be N^2 messages.
struct PeersLeft {
  std::vector<std::uint32_t> ranks;
};
// What a departure is reported as: "rank 3 left the job".
std::string leftTheJob(std::uint32_t rank);

struct Abort {
  std::string reason;
};

struct Goodbye {};
struct Shutdown {};

using ControlMessage = std::variant<Hello, Admitted, Welcome, Reject, Heartbeat, StoreRequest, StoreReply, PeerDown,
                                    PeersLeft, Abort, Goodbye, Shutdown>;

// Caps on what a peer may send; the sockets cap whole messages at kMaxControlMessage.
inline constexpr std::size_t kMaxControlMessage = 4u << 20;
inline constexpr std::size_t kMaxConfigEntries = 100'000;
inline constexpr std::size_t kMaxPeers = 1 << 16;

std::string encode(const ControlMessage& message, const JobToken::Key& macKey);
// Throws MalformedMessage. Hello / Welcome come back with `authentic` set
// to whether their MAC matches `macKey`.
ControlMessage decode(std::span<const std::byte> bytes, const JobToken::Key& macKey);

}  // namespace hpu::comm::detail
