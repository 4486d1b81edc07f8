#include "hpu/core/checkpoint/run_checkpoints.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <system_error>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/run_versions.h"
#include "hpu/core/checkpoint/checkpoint.h"

namespace hpu::core::checkpoint {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool isFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

using Outcome = RunCheckpoint::Outcome;

RunCheckpoint findLast(const RunCheckpointSearch& search) {
  for (const std::string& dir : search.dirs)
    if (const fs::path last = fs::path(dir) / "last.ckpt"; isFile(last))
      return {.path = last.string(), .how = "this run's last.ckpt"};
  if (!search.runs_root.empty()) {
    const std::vector<RunVersion> versions = runVersions(search.runs_root);
    for (auto version = versions.rbegin(); version != versions.rend(); ++version)  // newest first
      if (const fs::path last = version->dir / "checkpoints" / "last.ckpt"; isFile(last))
        return {.path = last.string(), .how = "the newest run's last.ckpt"};
  }
  return {.outcome = Outcome::kNoLast,
          .looked_in = search.runs_root.empty() ? (search.dirs.empty() ? "." : search.dirs.front()) : search.runs_root};
}

// The best_model_path a ModelCheckpoint state in `ckpt`'s metadata records,
// if that file exists.
std::optional<std::string> recordedBest(const std::string& ckpt) {
  std::map<std::string, std::string> meta;
  try {
    meta = readMetadata(ckpt);
  } catch (const CheckpointError&) {
    return std::nullopt;
  }
  const auto it = meta.find("callbacks");
  if (it == meta.end()) return std::nullopt;
  const json states = json::parse(it->second, nullptr, false);
  if (!states.is_object()) return std::nullopt;
  for (const auto& [key, text] : states.items()) {
    if (!text.is_string()) continue;
    const json state = json::parse(text.get<std::string>(), nullptr, false);
    if (!state.is_object() || !state.contains("best_model_path") || !state["best_model_path"].is_string()) continue;
    const std::string best = state["best_model_path"].get<std::string>();
    if (!best.empty() && isFile(best)) return best;
  }
  return std::nullopt;
}

}  // namespace

bool isRunCheckpointWord(std::string_view ckpt_path) { return ckpt_path == "last" || ckpt_path == "best"; }

RunCheckpoint findRunCheckpoint(std::string_view word, const RunCheckpointSearch& search) {
  if (word == "last") return findLast(search);
  if (!search.best_known.empty())
    return {.path = search.best_known, .how = "the best checkpoint of this run's ModelCheckpoint"};
  RunCheckpoint last = findLast(search);
  if (last.outcome != Outcome::kFound) return last;
  if (std::optional<std::string> best = recordedBest(last.path))
    return {.path = *best, .how = "the best checkpoint ModelCheckpoint recorded in " + last.path};
  return {.outcome = Outcome::kNoRecordedBest, .looked_in = last.path};
}

}  // namespace hpu::core::checkpoint
