#include "startup.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "hpu/comm/fault_injection.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/scalars.h"
#include "hpu/env/catalogue.h"

namespace hpu::cli {
namespace {

void setLogLevel(const Environment& env, bool verbose) {
  spdlog::level::level_enum level = spdlog::level::info;
  if (const std::optional<std::string> text = env.get("HPU_LOG_LEVEL")) {
    const auto parsed = spdlog::level::from_str(*text);
    if (parsed == spdlog::level::off && *text != "off")
      throw core::UsageError("HPU_LOG_LEVEL: unknown level '" + *text +
                             "' (trace, debug, info, warn, error, critical, off)");
    level = parsed;
  }
  if (verbose) level = spdlog::level::debug;
  spdlog::set_level(level);
}

// A process hpu-train started (a local rank, an elastic agent's worker) has
// its starter's variables, of which the starter already warned.
bool startedByHpuTrain(const Environment& env) {
  const std::optional<std::string> local_rank = env.get("LOCAL_RANK");
  return env.contains("HPU_WORKER_ERROR_FILE") || env.contains("HPU_RESTART_COUNT") ||
         (local_rank && *local_rank != "0");
}

void warnOfUnknownVariables(const Environment& env) {
  if (startedByHpuTrain(env)) return;
  for (const std::string& name : env::unknownProductVariables(env)) {
    const std::optional<std::string> meant = closestVariable(name);
    spdlog::warn("{} is set but hpu-train reads no such variable{} (hpu-train --help lists them)", name,
                 meant ? "; did you mean '" + *meant + "'?" : std::string());
  }
}

}  // namespace

std::optional<std::string> closestVariable(std::string_view name) {
  std::vector<std::string> spellings;
  std::vector<std::string_view> names;  // the variable each spelling stands for
  for (const env::Variable& v : env::catalogue()) {
    if (v.name.find('<') != std::string_view::npos) continue;  // a family's pattern
    spellings.emplace_back(v.name);
    names.push_back(v.name);
    std::vector<std::string_view> words;
    for (std::string_view rest = v.name;;) {
      const auto underscore = rest.find('_');
      words.push_back(rest.substr(0, underscore));
      if (underscore == std::string_view::npos) break;
      rest.remove_prefix(underscore + 1);
    }
    for (std::size_t skip = 1; skip + 1 < words.size(); ++skip) {
      std::string shorter;
      for (std::size_t i = 0; i < words.size(); ++i)
        if (i != skip) shorter += (shorter.empty() ? "" : "_") + std::string(words[i]);
      spellings.push_back(std::move(shorter));
      names.push_back(v.name);
    }
  }
  const std::vector<std::size_t> near = core::config::closeMatches(name, spellings, 1);
  if (near.empty()) return std::nullopt;
  return std::string(names[near.front()]);
}

void applyEnvironment(const Environment& env, bool verbose) {
  setLogLevel(env, verbose);
  warnOfUnknownVariables(env);
  comm::installFaultPlan(env);
}

}  // namespace hpu::cli
