// ModelSummary and RichModelSummary: the model's table at the start of fit
// (global rank 0 prints, every rank runs the sample that gives the out
// sizes). Rows are the modules down to max_depth (1: the model's children;
// -1: all; 0: no table), named by their path ("layers.0.self_attn"), with
// type, parameter count, out size (one sample's) and configuration; then
// Lightning's totals and the exact count ("Total params: 6,738,415,616 (6.7 B)"),
// a padded vocabulary's rows apart ("(+36,864 vocabulary padding)": in no
// count, in the size in MB, which is what the devices hold).
// ModelSummary prints Lightning's plain table; RichModelSummary rich's box
// table, in colour on a terminal. trainer.enable_model_summary adds a
// ModelSummary unless one of them is configured.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "hpu/core/config/registry.h"
#include "hpu/core/module/pipeline_module.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

using config::Type;

// Lightning's get_human_readable_count: "66", "235 K", "124 M", "6.7 B".
std::string humanReadableCount(std::int64_t n) {
  static const char* const kUnits[] = {" ", "K", "M", "B", "T"};
  const int digits = n > 0 ? static_cast<int>(std::floor(std::log10(static_cast<double>(n)))) + 1 : 1;
  const int groups = std::min((digits + 2) / 3, 5);
  const double scaled = static_cast<double>(n) * std::pow(10.0, -3 * (groups - 1));
  if (groups == 1 || scaled >= 100) return fmt::format("{} {}", static_cast<std::int64_t>(scaled), kUnits[groups - 1]);
  return fmt::format("{:.1f} {}", scaled, kUnits[groups - 1]);
}

// 6738415616 -> "6,738,415,616".
std::string withThousands(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// " (+36,864 vocabulary padding)" after a total, or nothing when unpadded.
std::string paddingNote(std::int64_t padding) {
  return padding > 0 ? fmt::format(" (+{} vocabulary padding)", withThousands(padding)) : "";
}

using Row = std::array<std::string, 5>;  // name, type, params, out sizes, config
constexpr std::array<const char*, 5> kHeader = {"Name", "Type", "Params", "Out sizes", "Config"};

struct Summary {
  std::vector<Row> rows;
  std::int64_t total = 0;
  std::int64_t trainable = 0;  // of parameters with requires_grad (not frozen)
  std::int64_t padding = 0;    // elements of a padded vocabulary's rows, in none of the counts
  double megabytes = 0;
};

void collect(const nn::Module& m, const std::string& prefix, int depth, int max_depth, std::vector<Row>& rows) {
  for (const auto& [name, child] : m.children()) {
    const Shape& out = child->lastOutputShape();
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    rows.push_back({path, child->typeName(), humanReadableCount(child->numParameters()),
                    out.ndim() == 0 ? std::string("?") : out.str(), child->describe()});
    if (max_depth < 0 || depth < max_depth) collect(*child, path, depth + 1, max_depth, rows);
  }
}

class ModelSummary : public Callback {
 public:
  explicit ModelSummary(std::int64_t max_depth) : max_depth_(static_cast<int>(max_depth)) {}
  std::string stateKey() const override { return "ModelSummary"; }

  void onFitStart(Trainer& trainer) override {
    if (max_depth_ == 0) return;
    trainer.recordOutputShapes();
    Summary s;
    Strategy& strategy = trainer.strategy();
    const int stages = strategy.pipelineStages();
    // Each stage's ranks hold a part of the model: the totals are the
    // stages' of one replica, a stage-shared parameter counted on the first.
    std::vector<Tensor> shared;
    if (const auto* stage = dynamic_cast<const PipelineModule*>(&trainer.model());
        stage != nullptr && stages > 1 && strategy.pipelineStage() > 0)
      shared = stage->stageSharedParameters();
    const nn::ParameterCount count = trainer.model().countParameters(shared);
    s.total = count.total;
    s.trainable = count.trainable;
    s.padding = count.padding;
    if (stages > 1) {
      const ops::ParallelGroup* tp = strategy.tensorParallelGroup();
      const bool counts = strategy.dataParallelRank() == 0 && (tp == nullptr || tp->rank() == 0);
      std::vector<double> n{static_cast<double>(s.total), static_cast<double>(s.trainable),
                            static_cast<double>(s.padding)};
      if (!counts) n.assign(n.size(), 0.0);
      strategy.allReduceSum(n);
      s.total = static_cast<std::int64_t>(n[0]);
      s.trainable = static_cast<std::int64_t>(n[1]);
      s.padding = static_cast<std::int64_t>(n[2]);
    }
    if (!trainer.isGlobalZero()) return;
    collect(trainer.model(), "", 1, max_depth_, s.rows);
    if (stages > 1)
      spdlog::info("ModelSummary: the rows are pipeline stage 1 of {} (rank 0's modules); the totals are the whole "
                   "model's",
                   stages);
    // What the devices hold: the padding too.
    s.megabytes =
        static_cast<double>(s.total + s.padding) * device::logicalSize(trainer.precision().paramDtype()) / 1e6;
    const std::string text = render(s);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }

 protected:
  // Lightning's layout: " | "-joined columns, rules above and below the rows.
  virtual std::string render(const Summary& s) const {
    std::array<std::size_t, 5> w{};
    for (std::size_t c = 0; c < 5; ++c) w[c] = std::string(kHeader[c]).size();
    for (const Row& r : s.rows)
      for (std::size_t c = 0; c < 5; ++c) w[c] = std::max(w[c], r[c].size());
    const std::size_t index_width = std::to_string(s.rows.size()).size();
    const auto line = [&](const std::string& index, const Row& r) {
      std::string out = fmt::format("{:<{}}", index, index_width);
      for (std::size_t c = 0; c < 5; ++c) out += fmt::format(" | {:<{}}", r[c], c == 4 ? 0 : w[c]);
      return out + "\n";
    };
    std::string header = line("", {kHeader[0], kHeader[1], kHeader[2], kHeader[3], kHeader[4]});
    const std::string rule(header.size() - 1, '-');
    std::string out = header + rule + "\n";
    for (std::size_t i = 0; i < s.rows.size(); ++i) out += line(std::to_string(i), s.rows[i]);
    const std::string count = humanReadableCount(s.total);
    return out + rule + "\n" +
           fmt::format("{:<10}Trainable params\n{:<10}Non-trainable params\n{:<10}Total params\n"
                       "{:<10.3f}Total estimated model params size (MB)\nTotal params: {}{}{}\n",
                       humanReadableCount(s.trainable), humanReadableCount(s.total - s.trainable), count,
                       s.megabytes, withThousands(s.total), s.total >= 1000 ? " (" + count + ")" : "",
                       paddingNote(s.padding));
  }

 private:
  int max_depth_;
};

// rich's box table (Lightning's RichModelSummary): heavy header rules, the
// header in bold magenta and the totals' labels in bold on a terminal.
class RichModelSummary final : public ModelSummary {
 public:
  using ModelSummary::ModelSummary;
  std::string stateKey() const override { return "RichModelSummary"; }

 private:
  std::string render(const Summary& s) const override {
    const bool tty = ::isatty(STDOUT_FILENO) == 1;
    const auto style = [&](const char* code, const std::string& text) {
      return tty ? fmt::format("\x1b[{}m{}\x1b[0m", code, text) : text;
    };
    std::vector<std::array<std::string, 6>> cells;
    cells.push_back({"", kHeader[0], kHeader[1], kHeader[2], kHeader[3], kHeader[4]});
    for (std::size_t i = 0; i < s.rows.size(); ++i)
      cells.push_back({std::to_string(i), s.rows[i][0], s.rows[i][1], s.rows[i][2], s.rows[i][3], s.rows[i][4]});
    std::array<std::size_t, 6> w{};
    for (const auto& row : cells)
      for (std::size_t c = 0; c < 6; ++c) w[c] = std::max(w[c], row[c].size());
    const auto rule = [&](const char* left, const char* fill, const char* mid, const char* right) {
      std::string out = left;
      for (std::size_t c = 0; c < 6; ++c) {
        for (std::size_t k = 0; k < w[c] + 2; ++k) out += fill;
        out += c == 5 ? right : mid;
      }
      return out + "\n";
    };
    const auto row = [&](const std::array<std::string, 6>& r, const char* bar, bool header) {
      std::string out = bar;
      for (std::size_t c = 0; c < 6; ++c) {
        // Counts align right, as rich aligns the Params column.
        const std::string cell = c == 3 && !header ? fmt::format(" {:>{}} ", r[c], w[c]) : fmt::format(" {:<{}} ", r[c], w[c]);
        out += (header ? style("1;35", cell) : cell) + bar;
      }
      return out + "\n";
    };
    std::string out = rule("┏", "━", "┳", "┓") + row(cells[0], "┃", true) + rule("┡", "━", "╇", "┩");
    for (std::size_t i = 1; i < cells.size(); ++i) out += row(cells[i], "│", false);
    out += rule("└", "─", "┴", "┘");
    const auto count = [](std::int64_t n) { return withThousands(n) + (n >= 1000 ? " (" + humanReadableCount(n) + ")" : ""); };
    out += style("1", "Trainable params") + ": " + count(s.trainable) + "\n";
    out += style("1", "Non-trainable params") + ": " + count(s.total - s.trainable) + "\n";
    out += style("1", "Total params") + ": " + count(s.total) + paddingNote(s.padding) + "\n";
    out += style("1", "Total estimated model params size (MB)") + fmt::format(": {:.3f}\n", s.megabytes);
    return out;
  }
};

config::StructSchema summarySchema(const char* name) {
  return {name, "", {{"max_depth", Type::integer().min(-1), "1", "Module depth of the table (-1: all, 0: none)."}}};
}

HPU_REGISTER_COMPONENT(Callback,
                       config::ComponentSchema{config::ComponentKind::kCallback,
                                               "ModelSummary",
                                               "lightning.pytorch.callbacks",
                                               summarySchema("ModelSummary"),
                                               "The model's table at the start of fit (trainer.enable_model_summary)."},
                       [](const config::Params& p) { return std::make_unique<ModelSummary>(p.getInt("max_depth")); });

HPU_REGISTER_COMPONENT(Callback,
                       config::ComponentSchema{config::ComponentKind::kCallback,
                                               "RichModelSummary",
                                               "lightning.pytorch.callbacks",
                                               summarySchema("RichModelSummary"),
                                               "The model's table as a rich box table, exact counts."},
                       [](const config::Params& p) { return std::make_unique<RichModelSummary>(p.getInt("max_depth")); });

}  // namespace
}  // namespace hpu::core
