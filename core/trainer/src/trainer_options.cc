#include "hpu/core/trainer/trainer_options.h"

#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <sstream>
#include <vector>

#include "hpu/core/config/params.h"
#include "hpu/core/base/errors.h"

namespace hpu::core {
namespace {

bool isFloatText(const std::string& s) { return s.find_first_of(".eE") != std::string::npos; }

// Lightning's barebones checks: every feature that may impact raw speed is
// off, and a config that turns one on is refused (in Lightning's words).
void applyBarebones(const config::Node& t, TrainerOptions& o) {
  std::vector<std::string> problems;
  const auto refuse = [&](const char* key, const char* lightning_value, const char* why) {
    const config::Node& n = *t.find(key);
    const std::string where = n.loc().str();
    problems.push_back(fmt::format("{}trainer.{}: `Trainer(barebones=True, {}={})` was passed. {} so it is disabled in "
                                   "barebones mode.",
                                   where.empty() ? "" : where + ": ", key, key, lightning_value, why));
  };
  const auto on = [&](const char* key) {
    const config::Node& n = *t.find(key);
    return !n.isNull() && n.str() != "false" && n.str() != "0";
  };
  if (on("enable_checkpointing")) refuse("enable_checkpointing", "True", "Checkpointing can impact raw speed");
  if (on("logger")) refuse("logger", "True", "Logging can impact raw speed");
  if (on("enable_progress_bar")) refuse("enable_progress_bar", "True", "The progress bar can impact raw speed");
  if (on("log_every_n_steps")) refuse("log_every_n_steps", t.find("log_every_n_steps")->str().c_str(), "Logging can impact raw speed");
  if (on("enable_model_summary")) refuse("enable_model_summary", "True", "Model summary can impact raw speed");
  if (on("num_sanity_val_steps"))
    refuse("num_sanity_val_steps", t.find("num_sanity_val_steps")->str().c_str(), "Sanity checking can impact raw speed");
  if (on("fast_dev_run")) refuse("fast_dev_run", "True", "Development run is not meant for raw speed evaluation");
  if (on("detect_anomaly")) refuse("detect_anomaly", "True", "Anomaly detection can impact raw speed");
  if (!t.find("profiler")->isNull()) refuse("profiler", "...", "Profiling can impact raw speed");
  if (!problems.empty()) throw ConfigError(problems);
  o.enable_checkpointing = o.enable_progress_bar = o.enable_model_summary = false;
  o.num_sanity_val_steps = 0;
}

}  // namespace

std::chrono::milliseconds parseDuration(const config::Node& n, const std::string& key_path) {
  auto bad = [&](const std::string& why) {
    std::string where = n.loc().str();
    return ConfigError((where.empty() ? "" : where + ": ") + key_path + ": " + why);
  };
  double seconds = 0;
  if (n.isScalar()) {
    std::vector<double> parts;
    std::stringstream ss(n.str());
    std::string part;
    while (std::getline(ss, part, ':')) {
      char* end = nullptr;
      const double v = std::strtod(part.c_str(), &end);
      if (part.empty() || *end != '\0' || v < 0) throw bad("expected \"DD:HH:MM:SS\", got '" + n.str() + "'");
      parts.push_back(v);
    }
    if (parts.size() != 4) throw bad("expected \"DD:HH:MM:SS\", got '" + n.str() + "'");
    seconds = ((parts[0] * 24 + parts[1]) * 60 + parts[2]) * 60 + parts[3];
  } else {
    static const std::pair<const char*, double> kUnits[] = {
        {"weeks", 604800}, {"days", 86400}, {"hours", 3600}, {"minutes", 60}, {"seconds", 1}, {"milliseconds", 0.001}};
    for (const auto& [key, value] : n.entries()) {
      double unit = -1;
      for (const auto& [name, u] : kUnits)
        if (key == name) unit = u;
      if (unit < 0) throw bad("unknown unit '" + key + "' (weeks, days, hours, minutes, seconds, milliseconds)");
      if (!value.isScalar()) throw bad(key + ": expected a number");
      seconds += config::asFloat(value) * unit;
    }
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

std::int64_t BatchLimit::of(std::int64_t available) const {
  if (!is_fraction) return std::min(count, available);
  return static_cast<std::int64_t>(std::floor(fraction * static_cast<double>(available)));
}

BatchLimit BatchLimit::parse(const config::Node& n) {
  BatchLimit l;
  if (n.isNull()) return l;
  if (isFloatText(n.str())) {
    l.fraction = config::asFloat(n);
  } else {
    l.is_fraction = false;
    l.count = config::asInt(n);
  }
  return l;
}

TrainerOptions TrainerOptions::parse(const config::Node& t) {
  auto get = [&](const char* key) -> const config::Node& { return *t.find(key); };
  auto optInt = [&](const char* key) -> std::optional<std::int64_t> {
    const auto& n = get(key);
    if (n.isNull()) return std::nullopt;
    return config::asInt(n);
  };
  auto flag = [&](const char* key, bool dflt) { return get(key).isNull() ? dflt : config::asBool(get(key)); };
  TrainerOptions o;
  o.accelerator = get("accelerator");
  o.strategy = get("strategy");
  o.devices = get("devices");
  o.logger = get("logger");
  o.callbacks = get("callbacks");
  o.profiler = get("profiler");
  o.plugins = get("plugins");
  o.num_nodes = config::asInt(get("num_nodes"));
  if (!get("precision").isNull()) o.precision = get("precision").str();  // null: Lightning's 32-true
  const auto& fdr = get("fast_dev_run");
  if (auto b = fdr.str() == "true" || fdr.str() == "false" ? std::optional<bool>(config::asBool(fdr)) : std::nullopt)
    o.fast_dev_run = *b ? 1 : 0;
  else
    o.fast_dev_run = config::asInt(fdr);
  o.max_steps = config::asInt(get("max_steps"));
  if (auto me = optInt("max_epochs"))
    o.max_epochs = *me;
  else
    o.max_epochs = o.max_steps == -1 ? 1000 : -1;
  o.min_epochs = optInt("min_epochs").value_or(0);
  o.min_steps = optInt("min_steps").value_or(0);
  if (!get("max_time").isNull()) o.max_time = parseDuration(get("max_time"), "trainer.max_time");
  o.limit_train = BatchLimit::parse(get("limit_train_batches"));
  o.limit_val = BatchLimit::parse(get("limit_val_batches"));
  o.limit_test = BatchLimit::parse(get("limit_test_batches"));
  o.limit_predict = BatchLimit::parse(get("limit_predict_batches"));
  o.val_check_interval = BatchLimit::parse(get("val_check_interval"));
  o.check_val_every_n_epoch = optInt("check_val_every_n_epoch");
  o.num_sanity_val_steps = optInt("num_sanity_val_steps").value_or(2);
  o.log_every_n_steps = optInt("log_every_n_steps").value_or(50);
  o.enable_checkpointing = flag("enable_checkpointing", true);
  o.enable_progress_bar = flag("enable_progress_bar", true);
  o.enable_model_summary = flag("enable_model_summary", true);
  o.accumulate_grad_batches = config::asInt(get("accumulate_grad_batches"));
  if (!get("gradient_clip_val").isNull()) o.gradient_clip_val = config::asFloat(get("gradient_clip_val"));
  o.clip_by_value = get("gradient_clip_algorithm").str() == "value";
  o.use_distributed_sampler = config::asBool(get("use_distributed_sampler"));
  if (!get("default_root_dir").isNull()) o.default_root_dir = get("default_root_dir").str();
  o.reload_dataloaders_every_n_epochs = config::asInt(get("reload_dataloaders_every_n_epochs"));
  o.detect_anomaly = config::asBool(get("detect_anomaly"));
  o.sync_batchnorm = config::asBool(get("sync_batchnorm"));
  o.barebones = config::asBool(get("barebones"));
  if (o.barebones) applyBarebones(t, o);
  o.dry_run = config::asBool(get("dry_run"));
  if (o.fast_dev_run > 0) {
    // Lightning's fast_dev_run: N batches of each stage, one epoch, no sanity check.
    BatchLimit n;
    n.is_fraction = false;
    n.count = o.fast_dev_run;
    o.limit_train = o.limit_val = o.limit_test = o.limit_predict = n;
    o.max_epochs = 1;
    o.max_steps = o.fast_dev_run;
    o.num_sanity_val_steps = 0;
    o.val_check_interval = BatchLimit{};
    o.check_val_every_n_epoch = 1;
    o.enable_checkpointing = false;
  }
  // As Lightning: overfit_batches sets the train and val limits, also under fast_dev_run.
  if (const BatchLimit overfit = BatchLimit::parse(get("overfit_batches"));
      overfit.is_fraction ? overfit.fraction > 0 : overfit.count > 0) {
    o.overfit = overfit;
    o.limit_train = o.limit_val = overfit;
  }
  return o;
}

}  // namespace hpu::core
