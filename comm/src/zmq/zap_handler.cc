#include "zap_handler.h"

#include <sodium.h>

#include <vector>

#include <spdlog/spdlog.h>

#include "../check.h"
#include "../log_limiter.h"
#include "sockets.h"

namespace hpu::comm::detail {
namespace {

bool sameBytes(const zmq::message_t& frame, const void* expected, std::size_t size) {
  return frame.size() == size && sodium_memcmp(frame.data(), expected, size) == 0;
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context, const JobKeys& keys, int rank)
    : socket_(makeSocket(context, zmq::socket_type::rep, SocketLimits{.lingerMs = 0, .maxMessageBytes = 64 * 1024})),
      keys_(keys),
      rank_(rank) {
  socket_.bind(kZapEndpoint);
  thread_ = std::thread([this] { serve(); });
}

ZapHandler::~ZapHandler() {
  stop_ = true;
  thread_.join();
}

void ZapHandler::serve() {
  LogLimiter limiter;
  while (!stop_) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
    // Request: version, request id, domain, address, routing id, mechanism, credentials...
    std::vector<zmq::message_t> frames;
    for (;;) {
      zmq::message_t frame;
      if (!socket_.recv(frame, zmq::recv_flags::dontwait)) break;
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    }
    HPU_COMM_CHECK(frames.size() >= 6, "libzmq sent a ZAP request with fewer than 6 frames");
    const std::string mechanism = frames[5].to_string();
    bool accepted = false;
    if (mechanism == "CURVE" && frames.size() >= 7) {
      accepted = sameBytes(frames[6], keys_.curveClient.publicKey.data(), keys_.curveClient.publicKey.size());
    } else if (mechanism == "PLAIN" && frames.size() >= 8) {
      accepted = sameBytes(frames[7], keys_.dataPassword.data(), keys_.dataPassword.size());
    }
    if (!accepted) {
      const std::string address = frames[3].to_string();
      std::size_t suppressed = 0;
      if (limiter.allow("zap " + address, suppressed)) {
        spdlog::warn("rank {}: refused a {} connection from {} to its {} socket: the peer does not hold this job's "
                     "token (HPU_JOB_TOKEN){}",
                     rank_, mechanism, address.empty() ? "a local process" : address, frames[2].to_string(),
                     suppressed ? fmt::format("; {} more refused since the last report", suppressed) : "");
      }
    }
    std::array<zmq::message_t, 6> reply{zmq::message_t(std::string_view("1.0")), std::move(frames[1]),
                                        zmq::message_t(std::string_view(accepted ? "200" : "400")),
                                        zmq::message_t(std::string_view(accepted ? "OK" : "wrong job token")),
                                        zmq::message_t(), zmq::message_t()};
    for (std::size_t i = 0; i < reply.size(); ++i) {
      if (!socket_.send(reply[i], i + 1 < reply.size() ? zmq::send_flags::sndmore | zmq::send_flags::dontwait
                                                       : zmq::send_flags::dontwait)) {
        break;
      }
    }
  }
  socket_.close();
}

}  // namespace hpu::comm::detail
