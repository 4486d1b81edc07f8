// trainer.profiler: advanced and pytorch, as Lightning's AdvancedProfiler
// and PyTorchProfiler report: per action, pstats' table of the actions and
// device ops that ran inside it (counts that follow from the loop: 32
// batches an epoch, 2 sanity + 32 validation steps); torch's key_averages
// table (layout, row_limit, sort_by_key, input shapes, self times adding up
// to the total) beside the Chrome trace.
#include <gmock/gmock.h>
#include <spdlog/fmt/fmt.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The section of a report after "Profile stats for: <action>\n", up to the next one.
std::string section(const std::string& report, const std::string& action) {
  const std::string head = "Profile stats for: " + action + "\n";
  const auto at = report.find(head);
  if (at == std::string::npos) return "";
  const auto end = report.find("Profile stats for: ", at + head.size());
  return report.substr(at + head.size(), end == std::string::npos ? std::string::npos : end - at - head.size());
}

struct StatsRow {
  std::int64_t calls;
  double tottime, percall, cumtime, cumpercall;
};

// pstats rows by function name.
std::map<std::string, StatsRow> statsRows(const std::string& text, std::vector<std::string>* order = nullptr) {
  std::map<std::string, StatsRow> rows;
  std::istringstream in(text);
  std::string line;
  const std::regex row(R"( *([0-9]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) (\S+))");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    rows[m[6]] = {std::stoll(m[1]), std::stod(m[2]), std::stod(m[3]), std::stod(m[4]), std::stod(m[5])};
    if (order) order->push_back(m[6]);
  }
  return rows;
}

using AdvancedProfilerTest = TrainRunTest;

TEST_F(AdvancedProfilerTest, CountsTheFunctionsOfEachAction) {
  const RunResult r = fitBoring({"--trainer.max_epochs=1", "--trainer.profiler=advanced"});
  EXPECT_THAT(r.out, StartsWith("FIT Profiler Report\nProfile stats for: setup\n"));
  const std::string epoch = section(r.out, "run_training_epoch");
  std::vector<std::string> order;
  const auto rows = statsRows(epoch, &order);
  EXPECT_EQ(rows.at("action:run_training_batch").calls, 32);
  EXPECT_EQ(rows.at("action:training_step").calls, 32);
  EXPECT_EQ(rows.at("action:backward").calls, 32);
  EXPECT_EQ(rows.at("hpu:linear_backward").calls, 32);
  EXPECT_EQ(rows.at("action:run_validation").calls, 1);
  EXPECT_EQ(rows.at("hpu:linear").calls, 64);  // 32 training and 32 validation steps
  std::int64_t calls = 0;
  for (const auto& [name, row] : rows) {
    calls += row.calls;
    EXPECT_LE(row.tottime, row.cumtime + 1e-3) << name;
  }
  EXPECT_THAT(epoch, StartsWith(fmt::format("         {} function calls in ", calls)));
  EXPECT_THAT(epoch, HasSubstr(" seconds\n\n   Ordered by: cumulative time\n\n"
                               "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n"));
  for (std::size_t i = 1; i < order.size(); ++i) EXPECT_GE(rows.at(order[i - 1]).cumtime, rows.at(order[i]).cumtime);
  // A batch encloses its step: more time inside it.
  EXPECT_GE(rows.at("action:run_training_batch").cumtime, rows.at("action:training_step").cumtime);
  // validation_step runs linear and mse_loss once each: 2 sanity steps + 32.
  const auto val = statsRows(section(r.out, "validation_step"));
  EXPECT_EQ(val.size(), 2u);
  EXPECT_EQ(val.at("hpu:linear").calls, 34);
  EXPECT_EQ(val.at("hpu:mse_loss").calls, 34);
}

TEST_F(AdvancedProfilerTest, RestrictsLinesAndWritesAFile) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.profiler=AdvancedProfiler", "--trainer.profiler.filename=perf",
             "--trainer.profiler.dirpath=prof", "--trainer.profiler.line_count_restriction=2"});
  const std::string report = read("prof/perf-rank0-fit.txt");
  const std::string epoch = section(report, "run_training_epoch");
  EXPECT_THAT(epoch, HasSubstr("   Ordered by: cumulative time\n   List reduced from 13 to 2 due to restriction <2>\n"));
  EXPECT_EQ(statsRows(epoch).size(), 2u);
}

using PyTorchProfilerTest = TrainRunTest;

struct TableRow {
  std::string name;
  double self_percent;
  std::int64_t calls;
};

std::vector<TableRow> tableRows(const std::string& table) {
  std::vector<TableRow> rows;
  std::istringstream in(table);
  std::string line;
  const std::regex row(R"( *(\S+) +([0-9.]+)% +\S+ +[0-9.]+% +\S+ +\S+ +([0-9]+)  .*)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) rows.push_back({m[1], std::stod(m[2]), std::stoll(m[3])});
  }
  return rows;
}

TEST_F(PyTorchProfilerTest, PrintsKeyAveragesAndWritesTheTrace) {
  const RunResult r = fitBoring({"--trainer.max_epochs=1", "--trainer.profiler=PyTorchProfiler", "--trainer.profiler.row_limit=-1",
                                 "--trainer.profiler.record_shapes=true"});
  const std::string table = section(r.out, "records");
  ASSERT_FALSE(table.empty()) << r.out;
  const std::string sep = std::string(35, '-') + "  " + [] {
    std::string s;
    for (int i = 0; i < 6; ++i) s += std::string(12, '-') + "  ";
    return s;
  }();
  EXPECT_THAT(table, StartsWith(sep + "\n" + fmt::format("{:>35}  ", "Name") +
                                "  Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls  \n" +
                                sep + "\n"));
  EXPECT_THAT(table, HasSubstr(sep + "\nSelf CPU time total: "));
  const std::vector<TableRow> rows = tableRows(table);
  std::map<std::string, std::int64_t> calls;
  double percent = 0;
  for (const TableRow& row : rows) {
    calls[row.name] = row.calls;
    percent += row.self_percent;
  }
  EXPECT_NEAR(percent, 100.0, 0.01 * static_cast<double>(rows.size()));  // self times add up to the total
  // The default schedule keeps training steps 2, 3, 4 and the validation steps the same way.
  EXPECT_EQ(calls.at("[pl][profile]training_step"), 3);
  EXPECT_EQ(calls.at("linear_backward"), 3);
  EXPECT_EQ(calls.at("[pl][profile]run_training_epoch"), 1);
  // trainer.profiler: pytorch is the same profiler with its defaults (20 rows).
  const RunResult named = fitBoring({"--trainer.max_epochs=1", "--trainer.profiler=pytorch"});
  EXPECT_EQ(tableRows(section(named.out, "records")).size(), std::min<std::size_t>(20, rows.size()));

  const nlohmann::json trace = nlohmann::json::parse(read("lightning_logs/version_0/rank0-fit.pt.trace.json"));
  int linear = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["name"] == "linear") {
      ++linear;
      EXPECT_EQ(e["args"]["Input Dims"].dump(), "[[2,32],[2,32],[2]]");
    }
  EXPECT_EQ(linear, calls.at("linear"));
  // The short name followed by one of the class's keys: the class with that key set.
  const RunResult limited =
      fitBoring({"--trainer.max_epochs=1", "--trainer.profiler=pytorch", "--trainer.profiler.row_limit=5"});
  EXPECT_EQ(tableRows(section(limited.out, "records")).size(), 5u);
}

TEST_F(PyTorchProfilerTest, RowLimitSortByKeyAndInputShapes) {
  const RunResult r = fitBoring({"--trainer.max_epochs=1", "--trainer.profiler=PyTorchProfiler",
                                 "--trainer.profiler.row_limit=4", "--trainer.profiler.sort_by_key=count",
                                 "--trainer.profiler.group_by_input_shapes=true", "--trainer.profiler.record_shapes=true",
                                 "--trainer.profiler.export_to_chrome=false"});
  const std::string table = section(r.out, "records");
  EXPECT_THAT(table, HasSubstr("# of Calls  Input Shapes"));
  const std::vector<TableRow> rows = tableRows(table);
  ASSERT_EQ(rows.size(), 4u) << table;
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].calls, rows[i].calls);
  EXPECT_THAT(table, HasSubstr("[[2, 32], [2, 32], [2]]"));
  EXPECT_FALSE(std::filesystem::exists(dir() / "lightning_logs/version_0/rank0-fit.pt.trace.json"));
}

}  // namespace
}  // namespace hpu::cli::testing
