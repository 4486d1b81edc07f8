#include "launch_dry_run.h"

#include <unistd.h>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "hpu/core/base/errors.h"
#include "hpu/core/config/params.h"
#include "hpu/device/byte_size.h"
#include "hpu/device/emulator.h"
#include "hpu/device/spec.h"
#include "job_end.h"
#include "selection.h"

namespace hpu::core::app {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kReportTopic = "dry_run";

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string hostName() {
  char host[256] = {};
  return ::gethostname(host, sizeof host - 1) == 0 ? host : "localhost";
}

// Where the first ModelCheckpoint writes: its dirpath, else
// <log_dir>/checkpoints, as the callback resolves it.
std::string checkpointDirectory(const TrainerOptions& o, const Trainer& trainer) {
  for (const config::Node* c : componentsOf(o.callbacks)) {
    if (classOf(*c) != "ModelCheckpoint") continue;
    const config::Node* args = c->find("init_args");
    const config::Node* dirpath = args ? args->find("dirpath") : nullptr;
    if (dirpath && !dirpath->isNull()) return dirpath->str();
    break;
  }
  return (fs::path(trainer.logDir()) / "checkpoints").string();
}

// "0-7" for consecutive ranks, else the list.
std::string rankRange(int first, int last) {
  return first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
}

std::string describeFiles(const std::vector<std::string>& files) {
  if (files.empty()) return "none";
  if (files.size() == 1) return files.front();
  return fmt::format("{} files, {} .. {}", files.size(), fs::path(files.front()).filename().string(),
                     fs::path(files.back()).filename().string());
}

// The line of the node whose ranks reported `reports`.
std::string nodeLine(int node, const std::vector<json>& reports) {
  std::uint64_t peak = 0, limit = 0, collectives_min = UINT64_MAX, collectives_max = 0;
  int groups = 0;
  std::vector<std::string> files;
  std::vector<int> devices;
  for (const json& r : reports) {
    peak = std::max(peak, r["peak"].get<std::uint64_t>());
    limit = r["limit"].get<std::uint64_t>();
    collectives_min = std::min(collectives_min, r["collectives"].get<std::uint64_t>());
    collectives_max = std::max(collectives_max, r["collectives"].get<std::uint64_t>());
    groups = std::max(groups, r["groups"].get<int>());
    for (const auto& f : r["files"]) files.push_back(f.get<std::string>());
    devices.push_back(r["device"].get<int>());
  }
  const json& first = reports.front();
  const std::string collectives = collectives_min == collectives_max
                                      ? std::to_string(collectives_max)
                                      : fmt::format("{}-{}", collectives_min, collectives_max);
  return fmt::format(
      "dry run: node {} ({}): ranks {} on hpu:{} ({}, shape-only): peak device memory {} of {}; {} collectives per "
      "rank in up to {} process groups agreed; checkpoint files: {}",
      node, first["host"].get<std::string>(), rankRange(first["rank"].get<int>(), reports.back()["rank"].get<int>()),
      rankRange(*std::min_element(devices.begin(), devices.end()), *std::max_element(devices.begin(), devices.end())),
      first["product"].get<std::string>(), device::formatByteSize(peak), device::formatByteSize(limit), collectives,
      groups, describeFiles(files));
}

}  // namespace

int runLaunchDryRun(const RunRequest& request) {
  const auto start = Clock::now();
  if (request.subcommand != "fit")
    throw UsageError("trainer.dry_run: rehearses fit's launch; run it as hpu-train fit --trainer.dry_run=true");
  device::EmulatorSettings settings = device::loadEmulatorSettings(request.env);
  settings.shapeOnly = true;  // the device's memory limit still holds
  settings.recipeCache.reset();
  device::Platform platform(settings);

  Pipeline pipeline = buildPipeline(request, platform, -1);
  const double joined = secondsSince(start);
  TrainerParts& parts = pipeline.parts;
  const TrainerOptions options = parts.options;
  Strategy& strategy = *parts.strategy;
  try {
    parts.loggers = selectLoggers(options);
    for (auto& l : parts.loggers) l->setup(options.default_root_dir, strategy, false, request.env);
  } catch (...) {
    failJob(strategy);
  }
  Trainer trainer(std::move(parts));
  try {
    comm::ScheduleCheck check;
    double step_began = 0;
    Trainer::DryRunHooks hooks;
    hooks.optimizer_ready = [&] { step_began = secondsSince(start); };
    hooks.step_end = [&](std::int64_t) { check = trainer.strategy().checkCollectiveSchedules(); };
    trainer.dryRunFit(*pipeline.model, *pipeline.data, 1, hooks);
    const double stepped = secondsSince(start);

    const std::string checkpoint =
        (fs::path(checkpointDirectory(options, trainer)) /
         fmt::format("epoch=0-step={}.ckpt", 1))
            .string();
    device::Device& dev = trainer.device();
    const json report{{"rank", trainer.strategy().globalRank()},
                      {"host", hostName()},
                      {"device", dev.index()},
                      {"product", std::string(dev.spec().product)},
                      {"peak", dev.allocator().stats().maxInUse},
                      {"limit", dev.allocator().limit()},
                      {"collectives", check.collectives},
                      {"groups", check.groups},
                      {"files", trainer.checkpointFiles(checkpoint)}};
    Strategy& s = trainer.strategy();
    s.postText(kReportTopic, report.dump());
    const int world = s.worldSize();
    const int local = s.localWorldSize();
    const int first = s.globalRank() - s.localRank();
    if (s.localRank() == 0) {
      std::vector<json> node;
      for (int r = first; r < first + local; ++r) node.push_back(json::parse(s.readText(kReportTopic, r)));
      spdlog::info("{}", nodeLine(first / local, node));
    }
    if (s.isGlobalZero()) {
      std::uint64_t peak = 0, limit = 0, fewest = UINT64_MAX, most = 0;
      int peak_rank = 0;
      std::size_t files = 0;
      for (int r = 0; r < world; ++r) {
        const json rep = json::parse(s.readText(kReportTopic, r));
        if (rep["peak"].get<std::uint64_t>() > peak) {
          peak = rep["peak"].get<std::uint64_t>();
          peak_rank = r;
        }
        limit = rep["limit"].get<std::uint64_t>();
        fewest = std::min(fewest, rep["collectives"].get<std::uint64_t>());
        most = std::max(most, rep["collectives"].get<std::uint64_t>());
        files += rep["files"].size();
      }
      spdlog::info(
          "dry run: {} ranks on {} node(s) wired in {:.1f} s (processes and rendezvous {:.1f} s, model and optimizer "
          "set up {:.1f} s, one optimizer step {:.1f} s), {}: peak device memory {} of {} (rank {}); every process "
          "group's ranks issued the same collectives ({} per rank); the first checkpoint, {}, would be {} file(s); "
          "nothing was written",
          world, options.num_nodes, secondsSince(start), joined, step_began - joined, stepped - step_began,
          s.name(), device::formatByteSize(peak), device::formatByteSize(limit), peak_rank,
          fewest == most ? std::to_string(most) : fmt::format("{}-{}", fewest, most), checkpoint, files);
    }
    s.barrier("dry_run_reported");
  } catch (...) {
    failJob(trainer.strategy());
  }
  return finishJob(trainer.strategy());
}

}  // namespace hpu::core::app
