#include "net.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

ResolvedAddress fromSockaddr(const sockaddr* sa) {
  ResolvedAddress out;
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    out.ipv6 = true;
    out.loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  } else {
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in4->sin_addr, text, sizeof text);
    out.loopback = (ntohl(in4->sin_addr.s_addr) >> 24) == 127;
  }
  out.ip = text;
  return out;
}

}  // namespace

ResolvedAddress resolveHost(std::string_view host, std::string_view variable) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string name(host);
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    throw RendezvousError(fmt::format("{}={} does not resolve ({}); set it to the address or host name of the node "
                                      "running rank 0",
                                      variable, host, gai_strerror(rc)));
  }
  const addrinfo* chosen = result;
  for (const addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      chosen = ai;
      break;
    }
  }
  ResolvedAddress out = fromSockaddr(chosen->ai_addr);
  freeaddrinfo(result);
  return out;
}

std::string tcpEndpoint(const ResolvedAddress& address, int port) {
  const std::string portText = port == 0 ? "*" : std::to_string(port);
  return address.ipv6 ? fmt::format("tcp://[{}]:{}", address.ip, portText)
                      : fmt::format("tcp://{}:{}", address.ip, portText);
}

ResolvedAddress localAddressFacing(const ResolvedAddress& remote) {
  if (remote.loopback) return remote;
  const int family = remote.ipv6 ? AF_INET6 : AF_INET;
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw RendezvousError(fmt::format("cannot open a socket: {}", std::strerror(errno)));
  sockaddr_storage target{};
  socklen_t length = 0;
  if (remote.ipv6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&target);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(9);
    inet_pton(AF_INET6, remote.ip.c_str(), &in6->sin6_addr);
    length = sizeof(sockaddr_in6);
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&target);
    in4->sin_family = AF_INET;
    in4->sin_port = htons(9);
    inet_pton(AF_INET, remote.ip.c_str(), &in4->sin_addr);
    length = sizeof(sockaddr_in);
  }
  sockaddr_storage local{};
  socklen_t localLength = sizeof local;
  // A connected UDP socket sends nothing but makes the kernel pick the route.
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&target), length) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &localLength) == 0;
  const int savedErrno = errno;
  ::close(fd);
  if (!ok) {
    throw RendezvousError(fmt::format("no route to rank 0 at {}: {}", remote.ip, std::strerror(savedErrno)));
  }
  return fromSockaddr(reinterpret_cast<sockaddr*>(&local));
}

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::string hostIdentity() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  std::getline(in, bootId);
  return hostName() + "/" + bootId;
}

}  // namespace hpu::comm::detail
