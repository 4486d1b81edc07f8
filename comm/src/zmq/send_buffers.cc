#include "send_buffers.h"

namespace hpu::comm::detail {

std::optional<zmq::message_t> SendBufferPool::message(std::size_t bytes) {
  if (bytes < kMinMessageBytes || bytes > kBufferBytes) return std::nullopt;
  std::unique_ptr<Buffer> buffer;
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      buffer = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!buffer) buffer = std::make_unique<Buffer>();
  buffer->pool = shared_from_this();
  std::byte* data = buffer->bytes.get();
  return zmq::message_t(data, bytes, &SendBufferPool::giveBack, buffer.release());
}

void SendBufferPool::giveBack(void*, void* hint) {
  std::unique_ptr<Buffer> buffer(static_cast<Buffer*>(hint));
  const std::shared_ptr<SendBufferPool> pool = std::move(buffer->pool);
  std::lock_guard lock(pool->mutex_);
  if (pool->idle_.size() < kMaxIdle) pool->idle_.push_back(std::move(buffer));
}

}  // namespace hpu::comm::detail
