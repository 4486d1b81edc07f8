// The ZAP handler of one ZeroMQ context: decides which incoming PLAIN and
// CURVE connections a process accepts. It must be bound before any secured
// server socket of the context exists, or libzmq would accept everyone.
// Admits CURVE clients presenting the job's derived client key and PLAIN
// clients presenting the job's data-plane password; refuses and logs (rate
// limited) everything else.
// Thread-safety: owns one thread; construct and destroy from one thread.
#pragma once

#include <atomic>
#include <thread>

#include <zmq.hpp>

#include "../security/job_keys.h"

namespace hpu::comm::detail {

class ZapHandler {
 public:
  // Binds kZapEndpoint in `context` before returning.
  ZapHandler(zmq::context_t& context, const JobKeys& keys, int rank);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

 private:
  void serve();

  zmq::socket_t socket_;
  const JobKeys& keys_;
  const int rank_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hpu::comm::detail
