// Choosing a MASTER_PORT when the user gave none.
#pragma once

#include <string>

namespace hpu::comm {

// A TCP port that nothing listens on at `address` right now, drawn at random
// below the kernel's ephemeral range (net.ipv4.ip_local_port_range): the
// source ports of other processes' outgoing connections come from that range,
// so they cannot take the port before rank 0 binds it (a port the kernel picks
// for a bind to port 0 is an ephemeral one, and can). Falls back to the
// kernel's pick when the range leaves no room below it. Throws LaunchError
// when no port can be bound.
int pickFreePort(const std::string& address);

}  // namespace hpu::comm
