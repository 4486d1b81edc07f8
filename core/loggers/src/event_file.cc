#include "event_file.h"

#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <algorithm>
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

constexpr std::string_view kEventFilePrefix = "events.out.tfevents.";

// The <unix seconds> of an event file's name, or 0.
long long nameSeconds(std::string_view name) {
  name.remove_prefix(kEventFilePrefix.size());
  long long seconds = 0;
  for (const char c : name.substr(0, name.find('.'))) {
    if (c < '0' || c > '9') return 0;
    seconds = seconds * 10 + (c - '0');
  }
  return seconds;
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

std::vector<std::string> readTfRecords(const std::string& path) {
  std::vector<std::string> records;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return records;
  std::string bytes;
  char buffer[1 << 16];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;) bytes.append(buffer, n);
  std::fclose(file);
  const auto littleEndian = [&](std::size_t at, int width) {
    std::uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
    return v;
  };
  for (std::size_t at = 0; at + 12 <= bytes.size();) {
    const std::uint64_t length = littleEndian(at, 8);
    if (littleEndian(at + 8, 4) != maskCrc32c(crc32c(std::string_view(bytes).substr(at, 8))) ||
        length > bytes.size() - at - 12 || bytes.size() - at - 12 - length < 4)
      break;
    const std::string_view data = std::string_view(bytes).substr(at + 12, length);
    if (littleEndian(at + 12 + length, 4) != maskCrc32c(crc32c(data))) break;
    records.emplace_back(data);
    at += 12 + length + 4;
  }
  return records;
}

std::vector<std::string> eventFilesIn(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (const std::string name = e.path().filename().string(); name.starts_with(kEventFilePrefix) && e.is_regular_file())
      names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

EventFile::EventFile(const std::string& dir, const std::string& suffix) {
  static std::atomic<int> files{0};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto seconds = static_cast<long long>(wallTime());
  const std::string name_end = fmt::format(".{}.{}.{}{}", hostName(), ::getpid(), files++, suffix);
  const auto name = [&] { return fmt::format("{}{:010d}{}", kEventFilePrefix, seconds, name_end); };
  if (const std::vector<std::string> earlier = eventFilesIn(dir); !earlier.empty() && earlier.back() >= name())
    seconds = std::max(seconds, nameSeconds(earlier.back()) + 1);
  path_ = (std::filesystem::path(dir) / name()).string();
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
