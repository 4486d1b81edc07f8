#include "worker_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace hpu::comm::detail {

WorkerOutput::WorkerOutput(int fd) : fd_(fd) { ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK); }

WorkerOutput::~WorkerOutput() { close(); }

void WorkerOutput::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void WorkerOutput::pump() {
  char buffer[16384];
  while (fd_ >= 0) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: nothing more for now
    if (n == 0) {
      close();
      return;
    }
    for (ssize_t i = 0; i < n; ++i) {
      partial_ += buffer[i];
      if (buffer[i] == '\n' || partial_.size() >= kMaxLineBytes) emit(std::exchange(partial_, {}));
    }
  }
}

void WorkerOutput::drain() {
  pump();
  if (!partial_.empty()) emit(std::exchange(partial_, {}) + "\n");
  close();
}

void WorkerOutput::emit(std::string line) {
  for (std::size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // our stderr is gone: keep the tail all the same
    done += static_cast<std::size_t>(n);
  }
  if (!line.empty() && line.back() == '\n') line.pop_back();
  tail_.push_back(std::move(line));
  if (tail_.size() > kTailLines) tail_.pop_front();
}

}  // namespace hpu::comm::detail
