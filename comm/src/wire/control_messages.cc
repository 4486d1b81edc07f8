#include "control_messages.h"

#include <sodium.h>

#include <map>
#include <tuple>

#include <spdlog/fmt/fmt.h>

#include "../check.h"
#include "codec.h"

namespace hpu::comm::detail {
namespace {

constexpr std::uint32_t kMagic = 0x52555048;  // "HPUR"
constexpr std::uint8_t kProtocolVersion = 3;
constexpr std::size_t kMaxText = 1 << 20;  // any single string field
constexpr std::size_t kMacBytes = crypto_auth_hmacsha256_BYTES;
constexpr std::size_t kEnvelopeBytes = 6;  // magic, protocol version, type

enum class Type : std::uint8_t {
  kHello = 1,
  kAdmitted,
  kWelcome,
  kReject,
  kHeartbeat,
  kStoreRequest,
  kStoreReply,
  kPeerDown,
  kAbort,
  kGoodbye,
  kShutdown,
  kPeersLeft,
};

using Mac = std::array<std::uint8_t, kMacBytes>;

Mac macOf(std::string_view bytes, const JobToken::Key& key) {
  Mac mac{};
  crypto_auth_hmacsha256(mac.data(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), key.data());
  return mac;
}

// A rank's entry in the peer table: u32 node | u16 TCP port | u32 ipc pid | u64 ipc nonce.
constexpr std::size_t kPeerEntryBytes = 18;

void writeEndpoints(WireWriter& w, const Endpoints& e) {
  w.str(e.tcpHost);
  w.u16(e.tcpPort);
  w.u32(e.ipcPid);
  w.u64(e.ipcNonce);
}

Endpoints readEndpoints(WireReader& r) {
  Endpoints e;
  e.tcpHost = r.str(kMaxText);
  e.tcpPort = r.u16();
  e.ipcPid = r.u32();
  e.ipcNonce = r.u64();
  return e;
}

struct Encoder {
  WireWriter& w;

  void operator()(const Hello& m) {
    w.u8(static_cast<std::uint8_t>(Type::kHello));
    w.u32(m.rank);
    w.u32(m.worldSize);
    w.u32(m.nodeRank);
    w.u32(m.localRank);
    w.u32(m.pid);
    w.str(m.version);
    w.bytes(m.configDigest);
    w.u32(static_cast<std::uint32_t>(m.config.entries.size()));
    for (const auto& [key, value] : m.config.entries) {
      w.str(key);
      w.str(value);
    }
    w.str(m.hostname);
    w.str(m.hostId);
    writeEndpoints(w, m.endpoints);
  }
  void operator()(const Admitted& m) {
    w.u8(static_cast<std::uint8_t>(Type::kAdmitted));
    w.u32(m.joined);
    w.u32(m.worldSize);
    w.u32(m.pid);
    w.str(m.hostname);
    w.str(m.hostId);
  }
  // u32 node count | per node: u32 node rank, host id, TCP host |
  // u32 rank count | per rank: its 18-byte entry.
  void operator()(const Welcome& m) {
    w.u8(static_cast<std::uint8_t>(Type::kWelcome));
    w.u32(static_cast<std::uint32_t>(m.peers.nodes.size()));
    for (const auto& n : m.peers.nodes) {
      w.u32(n.nodeRank);
      w.str(n.hostId);
      w.str(n.tcpHost);
    }
    w.u32(static_cast<std::uint32_t>(m.peers.ranks.size()));
    for (const auto& e : m.peers.ranks) {
      w.u32(e.node);
      w.u16(e.tcpPort);
      w.u32(e.ipcPid);
      w.u64(e.ipcNonce);
    }
  }
  void operator()(const Reject& m) {
    w.u8(static_cast<std::uint8_t>(Type::kReject));
    w.u32(static_cast<std::uint32_t>(m.offender));
    w.str(m.reason);
  }
  void operator()(const Heartbeat& m) {
    w.u8(static_cast<std::uint8_t>(Type::kHeartbeat));
    w.str(m.activity);
  }
  void operator()(const StoreRequest& m) {
    w.u8(static_cast<std::uint8_t>(Type::kStoreRequest));
    w.u8(static_cast<std::uint8_t>(m.op));
    w.u64(m.id);
    w.u32(static_cast<std::uint32_t>(m.keys.size()));
    for (const auto& k : m.keys) w.str(k);
    w.str(m.value);
    w.i64(m.delta);
    w.u64(m.timeoutMs);
  }
  void operator()(const StoreReply& m) {
    w.u8(static_cast<std::uint8_t>(Type::kStoreReply));
    w.u64(m.id);
    w.u8(static_cast<std::uint8_t>(m.status));
    w.str(m.value);
  }
  void operator()(const PeerDown& m) {
    w.u8(static_cast<std::uint8_t>(Type::kPeerDown));
    w.u32(m.rank);
    w.u8(static_cast<std::uint8_t>(m.kind));
    w.str(m.reason);
  }
  void operator()(const PeersLeft& m) {
    w.u8(static_cast<std::uint8_t>(Type::kPeersLeft));
    w.u32(static_cast<std::uint32_t>(m.ranks.size()));
    for (const std::uint32_t rank : m.ranks) w.u32(rank);
  }
  void operator()(const Abort& m) {
    w.u8(static_cast<std::uint8_t>(Type::kAbort));
    w.str(m.reason);
  }
  void operator()(const Goodbye&) { w.u8(static_cast<std::uint8_t>(Type::kGoodbye)); }
  void operator()(const Shutdown&) { w.u8(static_cast<std::uint8_t>(Type::kShutdown)); }
};

template <class E>
E readEnum(WireReader& r, E last) {
  const std::uint8_t v = r.u8();
  if (v > static_cast<std::uint8_t>(last)) throw MalformedMessage(fmt::format("enum value {} out of range", v));
  return static_cast<E>(v);
}

Hello readHello(WireReader& r) {
  Hello m;
  m.rank = r.u32();
  m.worldSize = r.u32();
  m.nodeRank = r.u32();
  m.localRank = r.u32();
  m.pid = r.u32();
  m.version = r.str(kMaxText);
  r.bytes(m.configDigest);
  const std::uint32_t entries = r.u32();
  if (entries > kMaxConfigEntries) throw MalformedMessage(fmt::format("{} config entries", entries));
  m.config.entries.reserve(entries);
  for (std::uint32_t i = 0; i < entries; ++i) {
    std::string key = r.str(kMaxText);
    std::string value = r.str(kMaxText);
    m.config.entries.emplace_back(std::move(key), std::move(value));
  }
  m.hostname = r.str(kMaxText);
  m.hostId = r.str(kMaxText);
  m.endpoints = readEndpoints(r);
  return m;
}

Welcome readWelcome(WireReader& r) {
  Welcome m;
  PeerTable& table = m.peers;
  const std::uint32_t nodes = r.u32();
  if (nodes > kMaxPeers) throw MalformedMessage(fmt::format("a peer table of {} nodes", nodes));
  table.nodes.resize(nodes);
  for (auto& n : table.nodes) {
    n.nodeRank = r.u32();
    n.hostId = r.str(kMaxText);
    n.tcpHost = r.str(kMaxText);
  }
  const std::uint32_t ranks = r.u32();
  if (ranks > kMaxPeers) throw MalformedMessage(fmt::format("a peer table of {} ranks", ranks));
  if (r.remaining() < std::size_t{ranks} * kPeerEntryBytes) {
    throw MalformedMessage(fmt::format("a peer table of {} ranks needs {} bytes, {} are left", ranks,
                                       std::size_t{ranks} * kPeerEntryBytes, r.remaining()));
  }
  table.ranks.resize(ranks);
  for (std::size_t rank = 0; rank < table.ranks.size(); ++rank) {
    PeerEntry& e = table.ranks[rank];
    e.node = r.u32();
    e.tcpPort = r.u16();
    e.ipcPid = r.u32();
    e.ipcNonce = r.u64();
    if (e.node >= nodes) throw MalformedMessage(fmt::format("rank {} is on node {} of a table of {}", rank, e.node, nodes));
  }
  return m;
}

StoreRequest readStoreRequest(WireReader& r) {
  StoreRequest m;
  m.op = readEnum(r, StoreRequest::Op::kWait);
  m.id = r.u64();
  const std::uint32_t keys = r.u32();
  if (keys > kMaxConfigEntries) throw MalformedMessage(fmt::format("{} store keys", keys));
  for (std::uint32_t i = 0; i < keys; ++i) m.keys.push_back(r.str(kMaxText));
  m.value = r.str(kMaxControlMessage);
  m.delta = r.i64();
  m.timeoutMs = r.u64();
  return m;
}

// Splits off and checks the trailing MAC of Hello / Welcome.
bool verifyMac(std::span<const std::byte>& bytes, const JobToken::Key& key) {
  if (bytes.size() < kEnvelopeBytes + kMacBytes) throw MalformedMessage("too short for its envelope and MAC");
  const auto body = bytes.first(bytes.size() - kMacBytes);
  const Mac expected = macOf({reinterpret_cast<const char*>(body.data()), body.size()}, key);
  const bool ok = sodium_memcmp(expected.data(), bytes.data() + body.size(), kMacBytes) == 0;
  bytes = body;
  return ok;
}

}  // namespace

std::string leftTheJob(std::uint32_t rank) { return fmt::format("rank {} left the job", rank); }

PeerTable PeerTable::of(const std::vector<const Hello*>& hellos) {
  PeerTable table;
  std::map<std::tuple<std::uint32_t, std::string_view, std::string_view>, std::uint32_t> index;
  table.ranks.reserve(hellos.size());
  for (const Hello* h : hellos) {
    const auto [it, added] = index.try_emplace({h->nodeRank, h->hostId, h->endpoints.tcpHost},
                                               static_cast<std::uint32_t>(table.nodes.size()));
    if (added) table.nodes.push_back(PeerNode{h->nodeRank, h->hostId, h->endpoints.tcpHost});
    table.ranks.push_back(PeerEntry{it->second, h->endpoints.tcpPort, h->endpoints.ipcPid, h->endpoints.ipcNonce});
  }
  return table;
}

std::string encode(const ControlMessage& message, const JobToken::Key& macKey) {
  WireWriter w;
  w.u32(kMagic);
  w.u8(kProtocolVersion);
  std::visit(Encoder{w}, message);
  std::string bytes = w.take();
  if (std::holds_alternative<Hello>(message) || std::holds_alternative<Welcome>(message)) {
    const Mac mac = macOf(bytes, macKey);
    bytes.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  }
  HPU_COMM_CHECK(bytes.size() <= kMaxControlMessage, "a control message exceeds kMaxControlMessage");
  return bytes;
}

ControlMessage decode(std::span<const std::byte> bytes, const JobToken::Key& macKey) {
  if (bytes.size() < kEnvelopeBytes) throw MalformedMessage(fmt::format("{} bytes is too short", bytes.size()));
  WireReader head(bytes);
  if (head.u32() != kMagic) throw MalformedMessage("wrong magic (not an hpu-train rendezvous message)");
  if (const auto version = head.u8(); version != kProtocolVersion) {
    throw MalformedMessage(fmt::format("protocol version {} (this build speaks {})", version, kProtocolVersion));
  }
  const auto type = static_cast<Type>(std::to_integer<std::uint8_t>(bytes[5]));
  bool authentic = false;
  if (type == Type::kHello || type == Type::kWelcome) authentic = verifyMac(bytes, macKey);
  WireReader r(bytes.subspan(kEnvelopeBytes));
  ControlMessage out;
  switch (type) {
    case Type::kHello: {
      Hello m = readHello(r);
      m.authentic = authentic;
      out = std::move(m);
      break;
    }
    case Type::kAdmitted: {
      Admitted m;
      m.joined = r.u32();
      m.worldSize = r.u32();
      m.pid = r.u32();
      m.hostname = r.str(kMaxText);
      m.hostId = r.str(kMaxText);
      out = std::move(m);
      break;
    }
    case Type::kWelcome: {
      Welcome m = readWelcome(r);
      m.authentic = authentic;
      out = std::move(m);
      break;
    }
    case Type::kReject: {
      Reject m;
      m.offender = static_cast<std::int32_t>(r.u32());
      m.reason = r.str(kMaxText);
      out = std::move(m);
      break;
    }
    case Type::kHeartbeat: out = Heartbeat{r.str(kMaxText)}; break;
    case Type::kStoreRequest: out = readStoreRequest(r); break;
    case Type::kStoreReply: {
      StoreReply m;
      m.id = r.u64();
      m.status = readEnum(r, StoreReply::Status::kError);
      m.value = r.str(kMaxControlMessage);
      out = std::move(m);
      break;
    }
    case Type::kPeerDown: {
      PeerDown m;
      m.rank = r.u32();
      m.kind = readEnum(r, PeerDownKind::kLeft);
      m.reason = r.str(kMaxText);
      out = std::move(m);
      break;
    }
    case Type::kAbort: out = Abort{r.str(kMaxText)}; break;
    case Type::kGoodbye: out = Goodbye{}; break;
    case Type::kShutdown: out = Shutdown{}; break;
    case Type::kPeersLeft: {
      PeersLeft m;
      const std::uint32_t ranks = r.u32();
      if (ranks > kMaxPeers) throw MalformedMessage(fmt::format("{} ranks left", ranks));
      if (r.remaining() < std::size_t{ranks} * 4) {
        throw MalformedMessage(fmt::format("{} ranks left in {} bytes", ranks, r.remaining()));
      }
      m.ranks.resize(ranks);
      for (auto& rank : m.ranks) rank = r.u32();
      out = std::move(m);
      break;
    }
    default: throw MalformedMessage(fmt::format("unknown message type {}", static_cast<int>(type)));
  }
  r.expectEnd();
  return out;
}

}  // namespace hpu::comm::detail
