#include "hpu/comm/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include <spdlog/fmt/fmt.h>

#include "../zmq/net.h"
#include "hpu/comm/errors.h"

namespace hpu::comm {
namespace {

constexpr int kLowestPort = 10000;
constexpr int kAttempts = 64;

// The first port of the kernel's ephemeral range (32768 when unreadable).
int ephemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  return in >> low >> high && low > 0 ? low : 32768;
}

// Binds a TCP socket to address:port (0: the kernel picks) as a listener
// would (SO_REUSEADDR) and returns the bound port, or 0 with errno set.
int tryBind(const detail::ResolvedAddress& resolved, int port) {
  const int fd = ::socket(resolved.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (resolved.ipv6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<std::uint16_t>(port));
    inet_pton(AF_INET6, resolved.ip.c_str(), &in6->sin6_addr);
    length = sizeof(sockaddr_in6);
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&storage);
    in4->sin_family = AF_INET;
    in4->sin_port = htons(static_cast<std::uint16_t>(port));
    inet_pton(AF_INET, resolved.ip.c_str(), &in4->sin_addr);
    length = sizeof(sockaddr_in);
  }
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&storage), length) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) == 0;
  const int error = errno;
  ::close(fd);
  errno = error;
  if (!ok) return 0;
  return ntohs(resolved.ipv6 ? reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port
                             : reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
}

}  // namespace

int pickFreePort(const std::string& address) {
  const detail::ResolvedAddress resolved = detail::resolveHost(address, "MASTER_ADDR");
  const int high = ephemeralLow() - 1;
  if (high > kLowestPort) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> draw(kLowestPort, high);
    for (int attempt = 0; attempt < kAttempts; ++attempt)
      if (const int port = tryBind(resolved, draw(rng)); port != 0) return port;
  }
  if (const int port = tryBind(resolved, 0); port != 0) return port;
  throw LaunchError(fmt::format("cannot find a free port on {}: {}", address, std::strerror(errno)));
}

}  // namespace hpu::comm
