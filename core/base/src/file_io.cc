#include "hpu/core/base/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "hpu/core/base/errors.h"

namespace hpu::core {

namespace {

// ".tmp-<host>-": the start of the name of every temporary this host writes;
// "<pid>-<target name>" follows.
std::string temporaryPrefix() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(".tmp-") + host + "-";
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw CheckpointError(fmt::format("cannot create directory {}: {}", dir.string(), ec.message()));
  temporary_ = (dir / (temporaryPrefix() + std::to_string(::getpid()) + "-" + target.filename().string())).string();
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw CheckpointError(fmt::format("cannot write {}: {}", temporary_, std::strerror(errno)));
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temporary_.c_str());
}

void AtomicFile::write(std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw CheckpointError(fmt::format("cannot write {}: {}", temporary_, std::strerror(errno)));
    }
    done += static_cast<std::size_t>(w);
  }
}

void AtomicFile::overwrite(std::uint64_t offset, std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw CheckpointError(fmt::format("cannot write {}: {}", temporary_, std::strerror(errno)));
    }
    done += static_cast<std::size_t>(w);
  }
}

void AtomicFile::commit() {
  const int fd = std::exchange(fd_, -1);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(temporary_.c_str());
    throw CheckpointError(fmt::format("cannot flush {}: {}", temporary_, std::strerror(err)));
  }
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temporary_.c_str());
    throw CheckpointError(fmt::format("cannot rename {} to {}: {}", temporary_, path_, std::strerror(err)));
  }
  const std::filesystem::path target(path_);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

std::vector<std::string> removeDeadTemporaries(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string prefix = temporaryPrefix();
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::size_t dash = name.find('-', prefix.size());
    if (dash == std::string::npos || dash == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size(), dash - prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    if (fs::remove(e.path(), ec)) removed.push_back(name);
  }
  return removed;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace hpu::core
