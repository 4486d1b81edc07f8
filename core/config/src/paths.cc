#include "hpu/core/config/paths.h"

#include <filesystem>
#include <system_error>

namespace hpu::core::config {
namespace {

namespace fs = std::filesystem;

const char* noun(PathKind kind) {
  switch (kind) {
    case PathKind::kFile: return "file";
    case PathKind::kDirectory: return "directory";
    case PathKind::kFileOrDirectory: return "file or directory";
  }
  return "?";
}

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

std::string shown(const fs::path& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal().string();
}

// "" when `p` (which exists) is of the kind asked for, else why not.
std::string kindProblem(const fs::path& p, PathKind kind) {
  std::error_code ec;
  const bool dir = fs::is_directory(p, ec);
  if (kind == PathKind::kFile && dir) return shown(p) + " is a directory; a file is expected";
  if (kind == PathKind::kDirectory && !dir) return shown(p) + " is not a directory; a directory is expected";
  return "";
}

std::string where(const Node& value, std::string_view key_path) {
  std::string prefix = value.loc().str();
  if (!prefix.empty()) prefix += ": ";
  if (!key_path.empty()) prefix += std::string(key_path) + ": ";
  return prefix;
}

}  // namespace

ResolvedPath resolvePath(const Node& value, PathKind kind, std::string_view key_path) {
  const std::string at = where(value, key_path);
  ResolvedPath out;
  if (value.str().empty()) {
    out.problem = at + "an empty path; expected a " + std::string(noun(kind));
    return out;
  }
  const fs::path given(value.str());
  const auto found = [&](const fs::path& p) {
    if (const std::string bad = kindProblem(p, kind); !bad.empty())
      out.problem = at + bad;
    else
      out.path = p.string();
    return out;
  };
  const SourceLoc& loc = value.loc();
  if (given.is_absolute() || !loc.file) {
    if (present(given)) return found(given);
    out.problem = at + "no such " + noun(kind) + ": " + shown(given) +
                  (given.is_absolute() ? "" : " (a relative path given here is read from the working directory)");
    return out;
  }
  const fs::path folder = fs::path(*loc.origin).parent_path();
  const fs::path beside = (folder / given).lexically_normal();
  if (present(beside)) return found(beside);
  if (present(given)) {
    found(given);
    if (out.problem.empty())
      out.note = at + value.str() + " is not in the config file's folder (" + shown(folder.empty() ? fs::path(".") : folder) +
                 "); read from the working directory: " + shown(given);
    return out;
  }
  out.problem = at + "no such " + noun(kind) + ": " + shown(beside) +
                " (a relative path in a config file is read from the file's folder" +
                (shown(beside) == shown(given) ? std::string(")")
                                               : "; the working directory has no " + value.str() + " either)");
  return out;
}

}  // namespace hpu::core::config
