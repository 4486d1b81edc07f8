// TQDMProgressBar and RichProgressBar: epoch, batch i/N (N: the batches the
// epoch runs, fewer than the loader's when max_steps ends it), it/s, ETA and the
// progress-bar metrics. On a terminal one line is redrawn in place (rich's:
// a coloured bar, "Epoch 0/9 ━━━━━━━━ 12/32 0:00:01 • 0:00:02 9.87it/s
// v_num: 0 train_loss: 0.123"); otherwise (logs, CI) plain lines are printed
// every tenth of an epoch. Global rank 0 only.
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "hpu/core/config/registry.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {

namespace {

using Clock = std::chrono::steady_clock;

std::string clock(double seconds) {
  const auto s = static_cast<long long>(seconds < 0 ? 0 : seconds);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{:02}:{:02}", s / 60, s % 60);
}

// "0:00:01", rich's time columns.
std::string richClock(double seconds) {
  const auto s = static_cast<long long>(seconds < 0 ? 0 : seconds);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

class ProgressBar final : public Callback {
 public:
  // `leave`: on a terminal, each epoch's finished bar stays on its line;
  // otherwise the next epoch's bar is drawn over it (Lightning's `leave`).
  ProgressBar(std::int64_t refresh_rate, bool rich, bool leave)
      : refresh_(refresh_rate), tty_(::isatty(STDOUT_FILENO) == 1), rich_(rich), leave_(leave) {}
  std::string stateKey() const override { return rich_ ? "RichProgressBar" : "TQDMProgressBar"; }

  // The bar's total is the batches the epoch will run: fewer than the
  // loader's when max_steps ends it first.
  void onTrainEpochStart(Trainer& t) override {
    start();
    total_ = t.epochTrainingBatches();
  }
  void onTrainBatchEnd(Trainer& t, std::int64_t i) override {
    show(t, fmt::format("Epoch {}", t.currentEpoch()), i + 1, total_, false);
  }
  // The last line says what ran (fewer when the epoch stopped early).
  void onTrainEpochEnd(Trainer& t) override {
    show(t, fmt::format("Epoch {}", t.currentEpoch()), t.batchesDoneInEpoch(), total_, true);
  }
  void onFitEnd(Trainer&) override {
    if (!open_line_) return;
    std::fprintf(stdout, "\n");
    std::fflush(stdout);
    open_line_ = false;
  }
  void onValidationStart(Trainer&) override { eval_start_ = Clock::now(); }
  void onValidationBatchEnd(Trainer& t, std::int64_t i) override {
    if (tty_ && t.isGlobalZero() && refresh_ > 0) evalLine(t, t.sanityChecking() ? "Sanity Checking" : "Validation", i + 1);
  }
  void onValidationEnd(Trainer& t) override { clearEval(t); }
  void onTestStart(Trainer&) override { eval_start_ = Clock::now(); }
  void onTestBatchEnd(Trainer& t, std::int64_t i) override { evalLine(t, "Testing", i + 1, !tty_); }
  void onTestEnd(Trainer& t) override { finishEval(t); }
  void onPredictStart(Trainer&) override { eval_start_ = Clock::now(); }
  void onPredictBatchEnd(Trainer& t, const Prediction&, std::int64_t i) override { evalLine(t, "Predicting", i + 1, !tty_); }
  void onPredictEnd(Trainer& t) override { finishEval(t); }

 private:
  void start() {
    start_ = Clock::now();
    last_printed_ = 0;
  }

  std::string metricsText(Trainer& t) const {
    std::string s;
    for (const auto& [k, v] : t.progressBarMetrics()) s += fmt::format(", {}={:.3g}", k, v);
    if (!t.loggers().empty()) s += ", v_num=" + t.loggers().front()->version();
    return s;
  }

  void show(Trainer& t, const std::string& desc, std::int64_t done, std::int64_t total, bool end) {
    if (!t.isGlobalZero() || refresh_ == 0 || total == 0) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
    const double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
    const std::string line = rich_ && tty_ ? richLine(t, done, total, elapsed, eta, rate)
                                           : fmt::format("{}: {:3}% {}/{} [{}<{}, {:.2f}it/s{}]", desc, done * 100 / total,
                                                         done, total, clock(elapsed), clock(eta), rate, metricsText(t));
    if (tty_) {
      if (!end && done % refresh_ != 0) return;
      std::fprintf(stdout, "\r%s\x1b[K%s", line.c_str(), end && leave_ ? "\n" : "");
      open_line_ = !(end && leave_);
    } else {
      const std::int64_t every = std::max<std::int64_t>(1, total / 10);
      if (!end && (done == total || done - last_printed_ < every)) return;  // the epoch's end prints the last line
      last_printed_ = done;
      std::fprintf(stdout, "%s\n", line.c_str());
    }
    std::fflush(stdout);
  }

  // rich's columns in Lightning's RichProgressBarTheme colours: description
  // white, bar #6206E0 on grey23, time grey54, speed grey70.
  std::string richLine(Trainer& t, std::int64_t done, std::int64_t total, double elapsed, double eta, double rate) const {
    constexpr std::int64_t kWidth = 40;
    const std::int64_t filled = done * kWidth / total;
    std::string bar = "\x1b[38;2;98;6;224m";
    for (std::int64_t i = 0; i < filled; ++i) bar += "━";
    bar += "\x1b[38;5;237m";
    for (std::int64_t i = filled; i < kWidth; ++i) bar += "━";
    std::string metrics;
    if (!t.loggers().empty()) metrics += " v_num: " + t.loggers().front()->version();
    for (const auto& [k, v] : t.progressBarMetrics()) metrics += fmt::format(" {}: {:.3f}", k, v);
    const std::int64_t last_epoch = t.options().max_epochs < 0 ? -1 : t.options().max_epochs - 1;
    const std::string epoch = last_epoch < 0 ? fmt::format("Epoch {}", t.currentEpoch())
                                             : fmt::format("Epoch {}/{}", t.currentEpoch(), last_epoch);
    return fmt::format("\x1b[37m{}\x1b[0m {}\x1b[0m {}/{} \x1b[38;5;245m{} • {}\x1b[0m \x1b[38;5;249m{:.2f}it/s\x1b[0m{}",
                       epoch, bar, done, total, richClock(elapsed), richClock(eta), rate, metrics);
  }

  void evalLine(Trainer& t, const char* desc, std::int64_t done, bool plain_end_only = false) {
    if (!t.isGlobalZero() || refresh_ == 0 || plain_end_only) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - eval_start_).count();
    std::fprintf(stdout, "\r%s: %lld/%lld [%s]\x1b[K", desc, static_cast<long long>(done),
                 static_cast<long long>(t.numEvalBatches()), clock(elapsed).c_str());
    std::fflush(stdout);
  }
  void clearEval(Trainer& t) {
    if (tty_ && t.isGlobalZero() && refresh_ > 0) {
      std::fprintf(stdout, "\r\x1b[K");
      std::fflush(stdout);
    }
  }
  void finishEval(Trainer& t) {
    if (!t.isGlobalZero() || refresh_ == 0) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - eval_start_).count();
    std::fprintf(stdout, "%s%lld batches in %s\n", tty_ ? "\r\x1b[K" : "", static_cast<long long>(t.numEvalBatches()),
                 clock(elapsed).c_str());
    std::fflush(stdout);
  }

  std::int64_t refresh_;
  bool tty_, rich_, leave_;
  bool open_line_ = false;  // a bar is on the terminal's current line
  Clock::time_point start_, eval_start_;
  std::int64_t last_printed_ = 0;
  std::int64_t total_ = 0;  // the current epoch's batches
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{config::ComponentKind::kCallback,
                            "TQDMProgressBar",
                            "lightning.pytorch.callbacks",
                            {"TQDMProgressBar",
                             "",
                             {{"refresh_rate", config::Type::integer().min(0), "1", "Redraw every N batches (0: off)."},
                              {"process_position", config::Type::integer().min(0), "0",
                               "Terminal line of the bar, for several bars at once.",
                               "hpu-train draws one bar, from global rank 0, on the current line"},
                              {"leave", config::Type::boolean(), "false",
                               "On a terminal, keep each epoch's finished bar (false: redraw one bar)."}}},
                            "The progress bar (added by trainer.enable_progress_bar)."},
    [](const config::Params& p) {
      return std::make_unique<ProgressBar>(p.getInt("refresh_rate"), false, p.getBool("leave"));
    });

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{config::ComponentKind::kCallback,
                            "RichProgressBar",
                            "lightning.pytorch.callbacks",
                            {"RichProgressBar",
                             "",
                             {{"refresh_rate", config::Type::integer().min(0), "1", "Redraw every N batches (0: off)."},
                              {"leave", config::Type::boolean(), "false",
                               "On a terminal, keep each epoch's finished bar (false: redraw one bar)."},
                              {"theme", config::Type::dict(),
                               "{description: white, progress_bar: '#6206E0', progress_bar_finished: '#6206E0', "
                               "progress_bar_pulse: '#6206E0', batch_progress: white, time: grey54, "
                               "processing_speed: grey70, metrics: white, metrics_text_delimiter: ' ', "
                               "metrics_format: .3f}",
                               "RichProgressBarTheme's colours and formats.",
                               "hpu-train draws rich's bar in the default RichProgressBarTheme only"},
                              {"console_kwargs", config::Type::optional(config::Type::dict()), "null",
                               "Options of rich's Console.",
                               "hpu-train writes the bar to stdout itself; there is no rich Console to configure"}}},
                            "rich's coloured progress bar on a terminal; plain lines otherwise."},
    [](const config::Params& p) {
      return std::make_unique<ProgressBar>(p.getInt("refresh_rate"), true, p.getBool("leave"));
    });

}  // namespace

}  // namespace hpu::core
