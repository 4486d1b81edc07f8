// A transport for rank 1 of 2 whose only message from rank 0 is given up
// front, for feeding one crafted message to a collective (the context tests
// and the fuzz targets). Sends go nowhere; a second recv times out.
#pragma once

#include <memory>

#include "hpu/comm/errors.h"
#include "hpu/comm/transport.h"

namespace hpu::comm::test_support {

class OneMessageTransport final : public Transport {
 public:
  explicit OneMessageTransport(std::unique_ptr<Message> message) : message_(std::move(message)) {}
  int rank() const override { return 1; }
  int size() const override { return 2; }
  void send(int, std::span<const std::byte>, std::span<const std::byte>, Deadline) override {}
  std::unique_ptr<Message> recv(int, Deadline) override {
    if (!message_) throw CommTimeoutError("no message from rank 0 before the deadline");
    return std::move(message_);
  }
  void abort(std::string_view) override {}
  void setActivity(std::string_view) override {}

 private:
  std::unique_ptr<Message> message_;
};

}  // namespace hpu::comm::test_support
