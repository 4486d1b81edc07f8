// A control message as a rank of a two-node job sends it, for the wire
// tests and the fuzz targets' seeds.
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
  hello.endpoints = {"tcp://10.0.0.2:41000", "ipc://@hpu-x"};
  return hello;
}

}  // namespace hpu::comm::test_support
