#include "hpu/comm/job_token.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/errors.h"
#include "sodium_init.h"

namespace hpu::comm {
namespace {

constexpr std::size_t kMinSecretLength = 16;
constexpr std::size_t kMaxTokenFileBytes = 4096;

std::string readTokenFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    throw EnvError(fmt::format("HPU_JOB_TOKEN_FILE={}: cannot open it ({})", path, std::strerror(errno)));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw EnvError(fmt::format("HPU_JOB_TOKEN_FILE={} is not a regular file", path));
  }
  if ((st.st_mode & 077) != 0) {
    throw EnvError(fmt::format("HPU_JOB_TOKEN_FILE={} has mode {:04o}; a token file must be readable by its owner "
                               "only: chmod 600 {}",
                               path, st.st_mode & 07777, path));
  }
  if (st.st_uid != ::geteuid()) {
    throw EnvError(fmt::format("HPU_JOB_TOKEN_FILE={} belongs to uid {}, not to this user (uid {})", path, st.st_uid,
                               ::geteuid()));
  }
  std::string content(kMaxTokenFileBytes + 1, '\0');
  std::size_t size = 0;
  for (;;) {
    const ssize_t n = ::read(fd, content.data() + size, content.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw EnvError(fmt::format("HPU_JOB_TOKEN_FILE={}: read failed ({})", path, std::strerror(errno)));
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
    if (size > kMaxTokenFileBytes) {
      throw EnvError(fmt::format("HPU_JOB_TOKEN_FILE={} is larger than {} bytes", path, kMaxTokenFileBytes));
    }
  }
  content.resize(size);
  while (!content.empty() && (content.back() == '\n' || content.back() == '\r')) content.pop_back();
  return content;
}

}  // namespace

JobToken JobToken::fromEnv(const Environment& env) {
  auto inline_secret = env.get("HPU_JOB_TOKEN");
  auto file = env.get("HPU_JOB_TOKEN_FILE");
  if (inline_secret && file) {
    throw EnvError("both HPU_JOB_TOKEN and HPU_JOB_TOKEN_FILE are set; set only one");
  }
  if (!inline_secret && !file) return JobToken();
  std::string secret = inline_secret ? *inline_secret : readTokenFile(*file);
  const std::string_view source = inline_secret ? "HPU_JOB_TOKEN" : "HPU_JOB_TOKEN_FILE";
  if (secret.size() < kMinSecretLength) {
    throw EnvError(fmt::format("the job token from {} has {} characters; use at least {} (for example the output of "
                               "`head -c 24 /dev/urandom | base64`)",
                               source, secret.size(), kMinSecretLength));
  }
  return JobToken(std::move(secret));
}

JobToken JobToken::generate() {
  detail::initSodium();
  std::array<unsigned char, 32> bytes{};
  randombytes_buf(bytes.data(), bytes.size());
  std::string hex(bytes.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), bytes.data(), bytes.size());
  hex.pop_back();
  return JobToken(std::move(hex));
}

JobToken::Key JobToken::derive(std::string_view purpose) const {
  detail::initSodium();
  Key master{};
  crypto_generichash(master.data(), master.size(), reinterpret_cast<const unsigned char*>(secret_.data()),
                     secret_.size(), nullptr, 0);
  Key key{};
  crypto_generichash(key.data(), key.size(), reinterpret_cast<const unsigned char*>(purpose.data()), purpose.size(),
                     master.data(), master.size());
  sodium_memzero(master.data(), master.size());
  return key;
}

}  // namespace hpu::comm
