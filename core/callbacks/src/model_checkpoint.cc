// ModelCheckpoint: saves checkpoints during fit, Lightning's semantics.
// Without a monitor it keeps the latest save_top_k (1: the newest; -1: all);
// with one it keeps the best save_top_k by the monitored metric. save_last
// also maintains last.ckpt. Filenames come from a template such as
// "{epoch}-{step}" or "{epoch}-{val_loss:.2f}" ("epoch=3-val_loss=0.35.ckpt").
// Saves are triggered every N epochs, every N optimizer steps, or every
// train_time_interval of wall time (one of them).
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using config::Type;

class ModelCheckpoint final : public Callback {
 public:
  explicit ModelCheckpoint(const config::Params& p)
      : dirpath_(p.has("dirpath") ? p.getString("dirpath") : ""),
        filename_(p.has("filename") ? p.getString("filename") : "{epoch}-{step}"),
        monitor_(p.has("monitor") ? p.getString("monitor") : ""),
        mode_max_(p.getString("mode") == "max"),
        save_top_k_(p.getInt("save_top_k")),
        save_last_(p.has("save_last") && p.getBool("save_last")),
        every_n_epochs_(p.has("every_n_epochs") ? p.getInt("every_n_epochs") : 0),
        every_n_steps_(p.has("every_n_train_steps") ? p.getInt("every_n_train_steps") : 0),
        weights_only_(p.getBool("save_weights_only")),
        auto_names_(p.getBool("auto_insert_metric_name")),
        verbose_(p.getBool("verbose")),
        version_counter_(p.getBool("enable_version_counter")) {
    if (monitor_.empty() && save_top_k_ > 1)
      p.fail("save_top_k", fmt::format("save_top_k={} needs a monitor to rank checkpoints by; set monitor", save_top_k_));
    if (p.has("train_time_interval")) time_interval_ = parseDuration(p.node("train_time_interval"), p.pathOf("train_time_interval"));
    if (p.has("save_on_train_epoch_end")) on_train_epoch_end_ = p.getBool("save_on_train_epoch_end");
    // As Lightning: the triggers exclude each other; none given means every epoch.
    const int triggers = (every_n_epochs_ > 0) + (every_n_steps_ > 0) + time_interval_.has_value();
    if (triggers > 1)
      p.fail("train_time_interval",
             fmt::format("Combination of parameters every_n_train_steps={}, every_n_epochs={} and "
                         "train_time_interval={} should be mutually exclusive; set one",
                         every_n_steps_, every_n_epochs_,
                         time_interval_ ? fmt::format("{}s", time_interval_->count() / 1000.0) : "None"));
    if (triggers == 0 && !p.has("every_n_epochs") && !p.has("every_n_train_steps")) every_n_epochs_ = 1;
  }

  std::string stateKey() const override {
    return fmt::format("ModelCheckpoint{{'monitor': {}, 'mode': '{}', 'every_n_train_steps': {}, 'every_n_epochs': {}}}",
                       monitor_.empty() ? "None" : "'" + monitor_ + "'", mode_max_ ? "max" : "min", every_n_steps_,
                       every_n_epochs_);
  }

  void setup(Trainer& trainer, data::Stage stage) override {
    if (dirpath_.empty()) dirpath_ = (fs::path(trainer.logDir()) / "checkpoints").string();
    const bool resumed = restoreState();
    if (stage != data::Stage::kFit) return;
    for (const std::string& name : removeDeadTemporaries(dirpath_))
      spdlog::info("rank {}: removed {} in {}, left by a writer that was killed", trainer.strategy().globalRank(), name,
                   dirpath_);
    if (resumed) rejoinTopK(trainer);
  }

  void onFitStart(Trainer&) override { last_time_check_ = std::chrono::steady_clock::now(); }

  void onTrainBatchEnd(Trainer& trainer, std::int64_t) override {
    if (every_n_steps_ > 0 && trainer.globalStep() % every_n_steps_ == 0) save(trainer, /*top_k=*/true);
    if (time_interval_ && timeToSave(trainer)) save(trainer, /*top_k=*/true);
  }

  // As Lightning: at the end of the training epoch when validation runs once
  // at its end (or never), else at the end of every validation.
  void onTrainEpochEnd(Trainer& trainer) override {
    if (savesOnTrainEpochEnd(trainer)) saveForEpoch(trainer);
  }
  void onValidationEnd(Trainer& trainer) override {
    if (trainer.stage() == data::Stage::kFit && !savesOnTrainEpochEnd(trainer)) saveForEpoch(trainer);
  }

  std::string stateJson() const override {
    json best = json::object();
    for (const auto& [path, score] : kept_) best[path] = score;
    return json{{"dirpath", dirpath_},           {"best_model_path", best_path_}, {"best_model_score", best_score_},
                {"last_model_path", last_path_}, {"kept", best}}
        .dump();
  }
  // Kept until setup(), which knows the directory.
  void loadStateJson(const std::string& text) override { restored_ = text; }

 private:
  bool better(double a, double b) const { return mode_max_ ? a > b : a < b; }

  // The state loaded from the checkpoint resumed from, when it was saved to
  // this directory (another directory: start afresh, as Lightning does).
  bool restoreState() {
    if (restored_.empty()) return false;
    const json j = json::parse(std::exchange(restored_, ""));
    if (j.value("dirpath", "") != dirpath_) return false;
    best_path_ = j.value("best_model_path", "");
    best_score_ = j.value("best_model_score", 0.0);
    last_path_ = j.value("last_model_path", "");
    kept_.clear();
    for (const auto& [path, score] : j["kept"].items()) kept_.emplace_back(path, score.get<double>());
    return true;
  }

  struct Saved {
    std::string path;
    double score;
    std::int64_t step;
  };

  // A checkpoint of this callback in dirpath_, with its score and step as
  // stored in it (its own state lists it among the kept), or nullopt.
  std::optional<Saved> savedByThis(const std::string& path) const {
    try {
      const auto meta = checkpoint::readMetadata(path);
      const json states = json::parse(meta.at("callbacks"));
      const json own = json::parse(states.at(stateKey()).get<std::string>());
      if (own.value("dirpath", "") != dirpath_ || !own.at("kept").contains(path)) return std::nullopt;
      return Saved{path, own["kept"][path].get<double>(), std::stoll(meta.at("global_step"))};
    } catch (const std::exception&) {  // not a checkpoint, another callback's, or unreadable
      return std::nullopt;
    }
  }

  // A run resumed into this directory: the checkpoints an earlier process of
  // the run saved that the resumed state does not list (saved after it, or
  // dropped by a process killed before it removed them) rejoin the top k by
  // their stored scores (without a monitor: the newest), and what falls out
  // is removed, so that save_top_k holds across restarts. Rank 0 decides; the
  // ranks agree on the outcome, since each one's saves depend on it.
  void rejoinTopK(Trainer& trainer) {
    json decision;
    if (trainer.isGlobalZero()) {
      std::vector<Saved> saved;
      for (const auto& [path, score] : kept_)
        if (auto s = savedByThis(path)) saved.push_back(*s);
      const std::size_t earlier = saved.size();
      std::error_code ec;
      for (const fs::directory_entry& e : fs::directory_iterator(dirpath_, ec)) {
        const std::string path = (fs::path(dirpath_) / e.path().filename()).string();
        if (e.path().extension() != ".ckpt" || e.path().filename() == "last.ckpt" || isKept(path)) continue;
        if (auto s = savedByThis(path)) saved.push_back(*s);
      }
      const bool unchanged = saved.size() == earlier && saved.size() == kept_.size();
      if (!unchanged) decision = decide(std::move(saved));
    }
    const std::string text = trainer.strategy().broadcast(decision.is_null() ? "" : decision.dump(), 0);
    if (text.empty()) return;
    decision = json::parse(text);
    kept_.clear();
    for (const json& e : decision["kept"]) {
      kept_.emplace_back(e[0].get<std::string>(), e[1].get<double>());
      if (monitor_.empty() || kept_.size() == 1 || better(kept_.back().second, best_score_))
        std::tie(best_path_, best_score_) = kept_.back();
    }
    for (const json& e : decision["removed"]) {
      const std::string path = e[0].get<std::string>();
      if (trainer.isGlobalZero())
        spdlog::info("removed {}: it falls out of save_top_k={} of the resumed run", path, save_top_k_);
      trainer.removeCheckpoint(path);
    }
  }

  // {"kept": [[path, score], ...] oldest first, "removed": [...]}: the top
  // save_top_k of `saved` by score (ties and no monitor: the newest).
  json decide(std::vector<Saved> saved) const {
    std::sort(saved.begin(), saved.end(), [](const Saved& a, const Saved& b) { return a.step < b.step; });
    // The ones to keep, oldest first (the order saveTopK drops from).
    std::vector<bool> keep(saved.size(), true);
    const auto k = static_cast<std::size_t>(save_top_k_);
    if (save_top_k_ >= 0 && saved.size() > k) {
      std::vector<std::size_t> rank(saved.size());
      for (std::size_t i = 0; i < rank.size(); ++i) rank[i] = i;
      std::stable_sort(rank.begin(), rank.end(), [&](std::size_t a, std::size_t b) {
        if (monitor_.empty() || saved[a].score == saved[b].score) return saved[a].step > saved[b].step;
        return better(saved[a].score, saved[b].score);
      });
      for (std::size_t i = k; i < rank.size(); ++i) keep[rank[i]] = false;
    }
    json decision = {{"kept", json::array()}, {"removed", json::array()}};
    for (std::size_t i = 0; i < saved.size(); ++i)
      decision[keep[i] ? "kept" : "removed"].push_back({saved[i].path, saved[i].score});
    return decision;
  }

  // train_time_interval: whether that much time passed since the last save
  // by time; rank 0's clock decides for every rank.
  bool timeToSave(Trainer& trainer) {
    const auto now = std::chrono::steady_clock::now();
    std::string due = now - last_time_check_ >= *time_interval_ ? "1" : "";
    due = trainer.strategy().broadcast(due, 0);
    if (due.empty()) return false;
    last_time_check_ = now;
    return true;
  }

  bool savesOnTrainEpochEnd(const Trainer& trainer) const {
    if (on_train_epoch_end_) return *on_train_epoch_end_;
    const TrainerOptions& o = trainer.options();
    if (o.check_val_every_n_epoch != 1) return false;
    const BatchLimit& val = o.limit_val;
    if (val.is_fraction ? val.fraction == 0 : val.count == 0) return true;
    return o.val_check_interval.is_fraction && o.val_check_interval.fraction == 1.0;
  }

  // The top-k checkpoint every_n_epochs, last.ckpt every time.
  void saveForEpoch(Trainer& trainer) {
    save(trainer, every_n_epochs_ > 0 && (trainer.currentEpoch() + 1) % every_n_epochs_ == 0);
  }

  std::string format(const Trainer& trainer) const {
    std::string out;
    const std::string& t = filename_;
    for (std::size_t i = 0; i < t.size();) {
      if (t[i] != '{') {
        out += t[i++];
        continue;
      }
      const std::size_t close = t.find('}', i);
      if (close == std::string::npos) throw UsageError("ModelCheckpoint filename '" + t + "' has an unclosed '{'");
      std::string token = t.substr(i + 1, close - i - 1);
      std::string spec;
      if (auto colon = token.find(':'); colon != std::string::npos) {
        spec = token.substr(colon);
        token.resize(colon);
      }
      double value;
      if (token == "epoch")
        value = static_cast<double>(trainer.currentEpoch());
      else if (token == "step")
        value = static_cast<double>(trainer.globalStep());
      else if (auto it = trainer.callbackMetrics().find(token); it != trainer.callbackMetrics().end())
        value = it->second;
      else
        throw UsageError(fmt::format("ModelCheckpoint filename '{}' uses {{{}}}, which was not logged", t, token));
      std::string text;
      if (token == "epoch" || token == "step")
        text = fmt::format(fmt::runtime("{" + (spec.empty() ? std::string() : spec) + "}"), static_cast<std::int64_t>(value));
      else
        text = fmt::format(fmt::runtime("{" + (spec.empty() ? std::string(":.4f") : spec) + "}"), value);
      out += auto_names_ ? token + "=" + text : text;
      i = close + 1;
    }
    return out;
  }

  // The path for `stem`: with the version counter, "-v1", "-v2"... are added
  // until it names no file this run did not keep; without, an existing file
  // is overwritten.
  std::string uniquePath(const std::string& stem) const {
    std::string path = (fs::path(dirpath_) / (stem + ".ckpt")).string();
    for (int v = 1; version_counter_ && fs::exists(path) && !isKept(path); ++v)
      path = (fs::path(dirpath_) / fmt::format("{}-v{}.ckpt", stem, v)).string();
    return path;
  }
  bool isKept(const std::string& path) const {
    for (const auto& [p, s] : kept_)
      if (p == path) return true;
    return false;
  }

  // Saves the top-k checkpoint (if `top_k`) and last.ckpt, at most once per
  // global step, never during the sanity check.
  void save(Trainer& trainer, bool top_k) {
    if (trainer.sanityChecking() || trainer.globalStep() == last_saved_step_) return;
    last_saved_step_ = trainer.globalStep();
    if (top_k) saveTopK(trainer);
    if (save_last_) {
      last_path_ = (fs::path(dirpath_) / "last.ckpt").string();
      trainer.saveCheckpoint(last_path_, weights_only_);
    }
  }

  void saveTopK(Trainer& trainer) {
    double score = 0;
    if (!monitor_.empty()) {
      auto it = trainer.callbackMetrics().find(monitor_);
      if (it == trainer.callbackMetrics().end()) {
        std::string names;
        for (const auto& [k, v] : trainer.callbackMetrics()) names += (names.empty() ? "`" : ", `") + k + "`";
        const std::string m = fmt::format("ModelCheckpoint(monitor='{}') could not find the monitored key in the returned "
                                          "metrics: {}. HINT: Did you call log('{}', value) in the LightningModule?",
                                          monitor_, names.empty() ? "none" : names, monitor_);
        // As Lightning: an error once validation has run, a warning before.
        if (trainer.numEvalBatches() > 0) throw UsageError(m);
        if (trainer.isGlobalZero()) spdlog::warn("{}; not saving", m);
        return;
      }
      score = it->second;
    }
    if (save_top_k_ != 0) {
      const bool keep_all = save_top_k_ < 0;
      bool take = keep_all || monitor_.empty() || static_cast<std::int64_t>(kept_.size()) < save_top_k_;
      std::size_t worst = 0;
      if (!take) {
        for (std::size_t i = 1; i < kept_.size(); ++i)
          if (better(kept_[worst].second, kept_[i].second)) worst = i;
        take = std::isfinite(score) && better(score, kept_[worst].second);
      }
      if (take) {
        // The state is updated before saving, as Lightning's: the file's own
        // callback state counts it among the kept ones (a run resumed from
        // it removes it in its turn).
        // Rank 0's name for every rank: each rank looking for a free name
        // itself could see rank 0's new file and name its own part -v1.
        const std::string path = trainer.strategy().broadcast(uniquePath(format(trainer)), 0);
        std::string dropped;
        if (!keep_all && static_cast<std::int64_t>(kept_.size()) >= save_top_k_ &&
            (!monitor_.empty() || save_top_k_ == 1)) {
          const std::size_t drop = monitor_.empty() ? 0 : worst;
          dropped = kept_[drop].first;
          kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(drop));
        }
        kept_.emplace_back(path, score);
        if (monitor_.empty() || best_path_.empty() || better(score, best_score_)) {
          best_path_ = path;
          best_score_ = score;
        }
        trainer.saveCheckpoint(path, weights_only_);
        if (verbose_ && trainer.isGlobalZero()) spdlog::info("Epoch {}, global step {}: saved {}", trainer.currentEpoch(), trainer.globalStep(), path);
        if (!dropped.empty() && dropped != path) trainer.removeCheckpoint(dropped);
      }
    }
  }

  std::string dirpath_, filename_, monitor_;
  bool mode_max_;
  std::int64_t save_top_k_;
  bool save_last_;
  std::int64_t every_n_epochs_, every_n_steps_;
  bool weights_only_, auto_names_, verbose_, version_counter_;
  std::optional<std::chrono::milliseconds> time_interval_;
  std::chrono::steady_clock::time_point last_time_check_;
  std::optional<bool> on_train_epoch_end_;  // null: decided from the validation schedule
  std::vector<std::pair<std::string, double>> kept_;
  std::string restored_;  // the state of the checkpoint resumed from, until setup()
  std::string best_path_, last_path_;
  double best_score_ = 0;
  std::int64_t last_saved_step_ = 0;  // as Lightning: nothing is saved at global step 0
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{
        config::ComponentKind::kCallback,
        "ModelCheckpoint",
        "lightning.pytorch.callbacks",
        {"ModelCheckpoint",
         "",
         {{"dirpath", Type::optional(Type::string()), "null", "Directory (default: <log_dir>/checkpoints)."},
          {"filename", Type::optional(Type::string()), "null",
           "Name template without .ckpt, e.g. \"{epoch}-{val_loss:.2f}\" (default: {epoch}-{step})."},
          {"monitor", Type::optional(Type::string()), "null", "Logged metric to rank checkpoints by (null: keep the latest)."},
          {"verbose", Type::boolean(), "false", "Log every save."},
          {"save_last", Type::optional(Type::boolean()), "null", "Also keep last.ckpt, the newest state (for ckpt_path: last)."},
          {"save_top_k", Type::integer().min(-1), "1", "How many checkpoints to keep (-1: all, 0: none)."},
          {"save_weights_only", Type::boolean(), "false", "Save only the model weights."},
          {"mode", Type::string({"min", "max"}), "min", "Whether a lower or higher monitored value is better."},
          {"auto_insert_metric_name", Type::boolean(), "true", "Write 'epoch=3' rather than '3' in names."},
          {"every_n_train_steps", Type::optional(Type::integer().min(0)), "null", "Save every N optimizer steps."},
          {"train_time_interval", Type::optional(Type::anyOf({Type::string(), Type::dict()})), "null",
           "Save after each interval of training time: \"DD:HH:MM:SS\" or {hours: 1, ...}."},
          {"every_n_epochs", Type::optional(Type::integer().min(0)), "null",
           "Save at the end of every N epochs (default 1 when no trigger is set)."},
          {"save_on_train_epoch_end", Type::optional(Type::boolean()), "null",
           "Save at the end of the training epoch (true) or after validation (false); null: after validation when "
           "it runs once per epoch, else at the training epoch's end."},
          {"enable_version_counter", Type::boolean(), "true",
           "Add -v1, -v2... to a name that is taken (false: overwrite it)."}}},
        "Saves checkpoints during fit: the latest or the best by a monitored metric."},
    [](const config::Params& p) { return std::make_unique<ModelCheckpoint>(p); });

}  // namespace
}  // namespace hpu::core
