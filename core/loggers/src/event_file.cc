#include "event_file.h"

#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "hpu/core/base/crc32c.h"
#include "hpu/core/base/errors.h"
#include "tensorboard/event.pb.h"

namespace hpu::core {
namespace {

void appendLittleEndian(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xffu);
}

std::string hostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "localhost";
  return host;
}

[[noreturn]] void fail(const std::string& path, const char* what) {
  throw Error(fmt::format("TensorBoardLogger: cannot {} {}: {}", what, path, std::strerror(errno)));
}

}  // namespace

double wallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string tfRecord(std::string_view data) {
  std::string header;
  appendLittleEndian(header, data.size(), 8);
  std::string out = header;
  appendLittleEndian(out, maskCrc32c(crc32c(header)), 4);
  out += data;
  appendLittleEndian(out, maskCrc32c(crc32c(data)), 4);
  return out;
}

EventFile::EventFile(const std::string& dir, const std::string& suffix) {
  static std::atomic<int> files{0};
  const auto seconds = static_cast<long long>(wallTime());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  path_ = (std::filesystem::path(dir) /
           fmt::format("events.out.tfevents.{:010d}.{}.{}.{}{}", seconds, hostName(), ::getpid(), files++, suffix))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) fail(path_, "create");
  tensorboard::Event version;
  version.set_wall_time(wallTime());
  version.set_file_version("brain.Event:2");
  pending_ = tfRecord(version.SerializeAsString());
  flush();
}

EventFile::~EventFile() {
  if (file_ == nullptr) return;
  try {
    flush();
  } catch (const Error&) {
    // A destructor cannot report; save() flushed what mattered.
  }
  std::fclose(file_);
}

void EventFile::append(const std::string& event, int max_queue, std::chrono::seconds flush_secs) {
  pending_ += tfRecord(event);
  if (++queued_ >= max_queue || std::chrono::steady_clock::now() - last_flush_ >= flush_secs) flush();
}

void EventFile::flush() {
  if (!pending_.empty() && std::fwrite(pending_.data(), 1, pending_.size(), file_) != pending_.size())
    fail(path_, "write");
  if (std::fflush(file_) != 0) fail(path_, "write");
  pending_.clear();
  queued_ = 0;
  last_flush_ = std::chrono::steady_clock::now();
}

}  // namespace hpu::core
