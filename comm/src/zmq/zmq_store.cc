#include "zmq_store.h"

#include <charconv>

#include "../store_values.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

class ZmqStore final : public Store {
 public:
  explicit ZmqStore(std::shared_ptr<ZmqSession> session) : session_(std::move(session)) {}

  void set(std::string_view key, std::string_view value, Deadline deadline) override {
    checkStoreKey(key);
    checkStoreValue(key, value.size());
    StoreRequest request{.op = StoreRequest::Op::kSet, .keys = {std::string(key)}, .value = std::string(value)};
    call("set", std::move(request), deadline);
  }

  std::string get(std::string_view key, Deadline deadline) override {
    checkStoreKey(key);
    return call("get", StoreRequest{.op = StoreRequest::Op::kGet, .keys = {std::string(key)}}, deadline);
  }

  std::int64_t add(std::string_view key, std::int64_t delta, Deadline deadline) override {
    checkStoreKey(key);
    const std::string value =
        call("add", StoreRequest{.op = StoreRequest::Op::kAdd, .keys = {std::string(key)}, .delta = delta}, deadline);
    std::int64_t result = 0;
    std::from_chars(value.data(), value.data() + value.size(), result);
    return result;
  }

  void wait(std::span<const std::string> keys, Deadline deadline) override {
    for (const auto& key : keys) checkStoreKey(key);
    if (keys.empty()) return;
    call("wait", StoreRequest{.op = StoreRequest::Op::kWait, .keys = {keys.begin(), keys.end()}}, deadline);
  }

 private:
  std::string call(std::string_view operation, StoreRequest request, Deadline deadline) {
    const std::string firstKey = request.keys.front();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    request.timeoutMs = static_cast<std::uint64_t>(std::max<std::int64_t>(0, left.count()));
    StoreReply reply = session_->client().request(std::move(request), deadline);
    switch (reply.status) {
      case StoreReply::Status::kOk: return std::move(reply.value);
      case StoreReply::Status::kTimeout: throw CommTimeoutError(storeTimeoutMessage(operation, firstKey));
      case StoreReply::Status::kError: throw CommError(reply.value);
    }
    return {};
  }

  std::shared_ptr<ZmqSession> session_;
};

}  // namespace

std::shared_ptr<Store> makeZmqStore(std::shared_ptr<ZmqSession> session) {
  return std::make_shared<ZmqStore>(std::move(session));
}

}  // namespace hpu::comm::detail
