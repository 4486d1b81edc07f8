// Host-level networking facts the rendezvous needs: resolving MASTER_ADDR,
// recognising loopback, the local address that faces rank 0, and an identity
// for "same machine" (hostname + kernel boot id).
// Thread-safety: pure functions (getaddrinfo is thread-safe).
#pragma once

#include <string>
#include <string_view>

namespace hpu::comm::detail {

struct ResolvedAddress {
  std::string ip;  // numeric: "10.0.0.1" or "::1"
  bool ipv6 = false;
  bool loopback = false;
};

// Resolves a host name or address, IPv4 first. Throws RendezvousError
// naming `variable` when it does not resolve.
ResolvedAddress resolveHost(std::string_view host, std::string_view variable);

// "tcp://10.0.0.1:29500" or "tcp://[::1]:29500"; port 0 gives "...:*" (any
// free port, for bind).
std::string tcpEndpoint(const ResolvedAddress& address, int port);

// The local address packets to `remote` leave from (loopback stays loopback).
ResolvedAddress localAddressFacing(const ResolvedAddress& remote);

std::string hostName();
// Equal on processes of one running kernel: hostname + /proc boot id.
std::string hostIdentity();

}  // namespace hpu::comm::detail
