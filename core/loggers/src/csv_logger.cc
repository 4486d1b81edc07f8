// CSVLogger: Lightning's CSV logger. <save_dir>/<name>/version_<N>/ holds
// metrics.csv (one row per logged step, columns sorted, empty cells where a
// metric was not logged) and hparams.yaml. Files are rewritten atomically.
#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>

#include "hpu/core/base/file_io.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/loggers/logger.h"
#include "hpu/core/strategies/strategy.h"
#include "log_directory.h"

namespace hpu::core {
namespace {

namespace fs = std::filesystem;

class CSVLogger final : public Logger {
 public:
  explicit CSVLogger(const config::Params& p)
      : dir_(p), prefix_(p.getString("prefix")), flush_every_(p.getInt("flush_logs_every_n_steps")) {}

  void setup(const std::string& default_root_dir, Strategy& strategy, bool continue_run,
             const Environment&) override {
    dir_.resolve(default_root_dir, strategy, continue_run);
    if (continue_run && strategy.isGlobalZero()) readRows();
  }
  std::string name() const override { return dir_.name(); }
  std::string version() const override { return dir_.version(); }
  std::string logDir() const override { return dir_.path(); }
  void logHyperparams(const config::Node& hparams) override {
    writeFileAtomically((fs::path(logDir()) / "hparams.yaml").string(), config::emitYaml(hparams));
  }
  void logMetrics(const std::map<std::string, double>& metrics, std::int64_t step) override {
    std::map<std::string, double> row;
    for (const auto& [k, v] : metrics) row[prefix_.empty() ? k : prefix_ + "-" + k] = v;  // Lightning's "-" join
    row["step"] = static_cast<double>(step);
    for (const auto& [k, v] : row) keys_.insert(k);
    rows_.push_back(std::move(row));
    if (++since_flush_ >= flush_every_) save();
  }
  void resumeAt(std::int64_t step) override {
    std::erase_if(rows_, [&](const auto& row) { return row.at("step") >= static_cast<double>(step); });
  }
  void save() override {
    since_flush_ = 0;
    if (rows_.empty()) return;
    std::string out;
    for (const auto& k : keys_) out += (out.empty() ? "" : ",") + k;
    out += "\n";
    for (const auto& row : rows_) {
      std::string line;
      bool first = true;
      for (const auto& k : keys_) {
        if (!first) line += ",";
        first = false;
        auto it = row.find(k);
        if (it == row.end()) continue;
        const double v = it->second;
        if (k == "epoch" || k == "step")
          line += fmt::format("{}", static_cast<std::int64_t>(v));
        else
          line += std::isnan(v) ? "nan" : fmt::format("{}", v);  // Python's spelling, never "-nan"
      }
      out += line + "\n";
    }
    writeFileAtomically((fs::path(logDir()) / "metrics.csv").string(), out);
  }

 private:
  // The rows of an existing metrics.csv (an elastic restart continues it).
  void readRows() {
    std::ifstream in(fs::path(logDir()) / "metrics.csv");
    std::string line;
    if (!std::getline(in, line)) return;
    std::vector<std::string> columns;
    std::stringstream header(line);
    for (std::string c; std::getline(header, c, ',');) columns.push_back(c);
    keys_.insert(columns.begin(), columns.end());
    while (std::getline(in, line)) {
      std::map<std::string, double> row;
      std::stringstream cells(line);
      std::string cell;
      for (std::size_t i = 0; i < columns.size() && std::getline(cells, cell, ','); ++i)
        if (!cell.empty()) row[columns[i]] = cell == "nan" ? std::nan("") : std::strtod(cell.c_str(), nullptr);
      if (row.count("step")) rows_.push_back(std::move(row));
    }
  }

  LogDirectory dir_;
  std::string prefix_;
  std::int64_t flush_every_;
  std::int64_t since_flush_ = 0;
  std::set<std::string> keys_;
  std::vector<std::map<std::string, double>> rows_;
};

HPU_REGISTER_COMPONENT(
    Logger,
    config::ComponentSchema{
        config::ComponentKind::kLogger,
        "CSVLogger",
        "lightning.pytorch.loggers",
        {"CSVLogger",
         "",
         [] {
           auto params = logDirectoryParams();
           params.push_back({"prefix", config::Type::string(), "''", "Prefix of every metric key."});
           params.push_back({"flush_logs_every_n_steps", config::Type::integer().min(1), "100",
                             "Rewrite metrics.csv every N logged rows."});
           return params;
         }()},
        "Writes metrics.csv and hparams.yaml under <save_dir>/<name>/version_<N>."},
    [](const config::Params& p) { return std::make_unique<CSVLogger>(p); });

}  // namespace
}  // namespace hpu::core
