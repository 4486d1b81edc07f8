// libFuzzer target: the config loader, as `hpu-train fit -c FILE FLAGS...`
// runs it. Input: the file's YAML text, then NUL-separated command-line
// tokens ("--trainer.max_epochs=3"). Bad input must come back as a
// UsageError (ConfigError included), which the CLI prints with exit code 2;
// any other exception or a sanitizer report is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hpu/cli/overrides.h"
#include "hpu/core/app/root.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/compose.h"

namespace {

// The config "file": a memfd, named by its /proc path, rewritten per input.
const std::string& configPath(std::string_view text) {
  static const int fd = ::memfd_create("hpu-fuzz-config", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  [[maybe_unused]] const int truncated = ::ftruncate(fd, 0);
  [[maybe_unused]] const ssize_t written = ::pwrite(fd, text.data(), text.size(), 0);
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t end = input.find('\0');
  std::vector<std::string> tokens;
  for (std::size_t at = end; at != std::string_view::npos && at < input.size();) {
    const std::size_t next = input.find('\0', at + 1);
    tokens.emplace_back(input.substr(at + 1, next == std::string_view::npos ? next : next - at - 1));
    at = next;
  }
  hpu::core::config::ConfigSources sources;
  sources.subcommand = "fit";
  sources.files = {configPath(input.substr(0, end))};
  try {
    sources.overrides = hpu::cli::parseOverrides(tokens);
    hpu::core::config::composeConfig(sources, hpu::core::config::rootType());
  } catch (const hpu::core::UsageError&) {
  }
  return 0;
}
