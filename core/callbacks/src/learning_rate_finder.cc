// LearningRateFinder: Lightning's callback that runs the range test
// (learning_rate_finder.h) at the start of fit, prints the suggestion, draws
// lr_find.png in the log directory and, with update_attr, starts the fit
// with the suggested lr (as Lightning sets the model's lr attribute, which
// its optimizer is configured from).
#include "hpu/core/callbacks/learning_rate_finder.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "hpu/core/base/chart.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {

std::optional<std::size_t> suggestLrIndex(std::span<const double> losses, std::size_t skip_begin,
                                          std::size_t skip_end) {
  std::vector<double> kept;
  for (std::size_t i = skip_begin; i + skip_end < losses.size(); ++i)
    if (std::isfinite(losses[i])) kept.push_back(losses[i]);
  const std::size_t n = kept.size();
  if (n < 2) return std::nullopt;
  std::size_t best = 0;
  double steepest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = i == 0 ? kept[1] - kept[0] : i + 1 == n ? kept[n - 1] - kept[n - 2] : (kept[i + 1] - kept[i - 1]) / 2;
    if (i == 0 || g < steepest) {
      steepest = g;
      best = i;
    }
  }
  return best + skip_begin;
}

LrFindResult lrFind(Trainer& trainer, const LrFindOptions& o) {
  // The state to come back to, in a checkpoint named by global rank 0.
  const std::string name = trainer.strategy().broadcast(
      fmt::format(".lr_find_{}_{}.ckpt", ::getpid(), std::chrono::steady_clock::now().time_since_epoch().count()), 0);
  const std::string path = (std::filesystem::path(trainer.options().default_root_dir) / name).string();
  trainer.saveCheckpoint(path);

  LrFindResult r;
  const auto lr_at = [&](std::int64_t step) {
    const double t = static_cast<double>(step) / static_cast<double>(o.num_training_steps);
    return o.linear ? o.min_lr + t * (o.max_lr - o.min_lr) : o.min_lr * std::pow(o.max_lr / o.min_lr, t);
  };
  constexpr double kBeta = 0.98;
  double average = 0, best = 0;
  trainer.runTrainingSteps(o.num_training_steps, lr_at, [&](std::int64_t step, double loss) {
    const std::int64_t n = step + 1;
    average = kBeta * average + (1 - kBeta) * loss;
    const double smoothed = average / (1 - std::pow(kBeta, static_cast<double>(n)));
    const bool diverged = o.early_stop_threshold && n > 1 && smoothed > *o.early_stop_threshold * best;
    if (smoothed < best || n == 1) best = smoothed;
    r.lrs.push_back(lr_at(step));
    r.losses.push_back(smoothed);
    return !diverged;
  });
  if (static_cast<std::int64_t>(r.lrs.size()) != o.num_training_steps && trainer.isGlobalZero())
    spdlog::info("LR finder stopped early after {} steps due to diverging loss.", r.lrs.size());
  trainer.restoreCheckpoint(path);
  trainer.removeCheckpoint(path);
  r.suggestion = suggestLrIndex(r.losses);
  if (!r.suggestion && trainer.isGlobalZero())
    spdlog::error("Failed to compute suggestion for learning rate because there are not enough points. Increase the "
                  "loop iteration limits or the size of your dataset/dataloader.");
  return r;
}

void plotLrFind(const LrFindResult& r, bool linear, const std::string& path) {
  ChartPanel panel{.title = "Learning rate finder", .x_label = "Learning rate", .y_label = "Loss", .log_x = !linear};
  ChartSeries curve{.name = "loss"};
  for (std::size_t i = std::min<std::size_t>(10, r.lrs.size()); i + 1 < r.lrs.size(); ++i) {
    curve.x.push_back(r.lrs[i]);
    curve.y.push_back(r.losses[i]);
  }
  panel.series.push_back(std::move(curve));
  if (r.suggestion)
    panel.mark = ChartPanel::Mark{r.lrs[*r.suggestion], r.losses[*r.suggestion],
                                  fmt::format("suggested lr {:.3g}", r.lrs[*r.suggestion])};
  drawChart({panel}, path);
}

namespace {

using config::Type;

class LearningRateFinder final : public Callback {
 public:
  LearningRateFinder(LrFindOptions options, bool update_attr) : o_(options), update_attr_(update_attr) {}
  std::string stateKey() const override { return "LearningRateFinder"; }

  void onFitStart(Trainer& t) override {
    if (t.options().fast_dev_run != 0) {
      if (t.isGlobalZero()) spdlog::warn("Skipping learning rate finder since `fast_dev_run` is enabled.");
      return;
    }
    const LrFindResult r = lrFind(t, o_);
    if (t.isGlobalZero()) {
      const std::string plot = (std::filesystem::path(t.logDir()) / "lr_find.png").string();
      std::filesystem::create_directories(t.logDir());
      plotLrFind(r, o_.linear, plot);
      if (r.suggestion)
        spdlog::info("Learning rate finder: suggested lr {} (steepest fall of the smoothed loss); curve in {}",
                     *r.suggestedLr(), plot);
    }
    if (update_attr_ && r.suggestion) {
      t.setLearningRate(*r.suggestedLr());
      if (t.isGlobalZero()) spdlog::info("Learning rate set to {}", *r.suggestedLr());
    }
  }

 private:
  LrFindOptions o_;
  bool update_attr_;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{
        config::ComponentKind::kCallback,
        "LearningRateFinder",
        "lightning.pytorch.callbacks",
        {"LearningRateFinder",
         "",
         {{"min_lr", Type::real().min(0.0, true), "1.0e-08", "The lr of the first step."},
          {"max_lr", Type::real().min(0.0, true), "1.0", "The lr the test rises to."},
          {"num_training_steps", Type::integer().min(1), "100", "Optimizer steps of the test."},
          {"mode", Type::string({"exponential", "linear"}), "exponential", "How the lr rises."},
          {"early_stop_threshold", Type::optional(Type::real()), "4.0",
           "Stop when the smoothed loss exceeds this times the best (null: never)."},
          {"update_attr", Type::boolean(), "true", "Start the fit with the suggested lr."},
          {"attr_name", Type::string({"", "lr", "learning_rate"}), "''",
           "The model attribute Lightning sets; hpu-train sets the optimizer's lr, whichever is named."}}},
        "Runs the learning-rate range test before fit, plots it, and starts the fit with the suggested lr."},
    [](const config::Params& p) {
      LrFindOptions o;
      o.min_lr = p.getFloat("min_lr");
      o.max_lr = p.getFloat("max_lr");
      if (o.max_lr <= o.min_lr)
        p.fail("max_lr", fmt::format("should be above min_lr ({}); got {}", o.min_lr, o.max_lr));
      o.num_training_steps = p.getInt("num_training_steps");
      o.linear = p.getString("mode") == "linear";
      if (p.has("early_stop_threshold")) {
        o.early_stop_threshold = p.getFloat("early_stop_threshold");
      } else {
        o.early_stop_threshold = std::nullopt;
      }
      return std::make_unique<LearningRateFinder>(o, p.getBool("update_attr"));
    });

}  // namespace
}  // namespace hpu::core
