// Control messages as a rank of a two-node job sends them and as rank 0
// answers, for the wire tests and the fuzz targets' seeds.
#pragma once

#include "../../comm/src/wire/control_messages.h"

namespace hpu::comm::test_support {

inline detail::Hello sampleHello() {
  detail::Hello hello;
  hello.rank = 5;
  hello.worldSize = 8;
  hello.nodeRank = 1;
  hello.localRank = 1;
  hello.pid = 4242;
  hello.version = "0.1.0";
  hello.config.entries = {{"trainer.precision", "bf16-mixed"}, {"model.lr", "0.01"}};
  hello.configDigest = hello.config.digest();
  hello.hostname = "node-b";
  hello.hostId = "node-b/boot";
  hello.endpoints = {"10.0.0.2", 41000, 4242, 0x0123456789abcdefu};
  return hello;
}

// Rank 0's table for a job of two nodes of two ranks each.
inline detail::PeerTable samplePeerTable() {
  detail::PeerTable table;
  table.nodes = {{0, "node-a/boot", "10.0.0.1"}, {1, "node-b/boot", "10.0.0.2"}};
  table.ranks = {{0, 41000, 4240, 0x1111}, {0, 41001, 4241, 0x2222}, {1, 41000, 4242, 0x3333}, {1, 41001, 4243, 0x4444}};
  return table;
}

}  // namespace hpu::comm::test_support
