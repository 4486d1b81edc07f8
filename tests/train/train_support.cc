#include "train_support.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace hpu::cli::testing {
namespace {

std::vector<std::string> splitCells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

}  // namespace

std::vector<std::string> CsvTable::column(const std::string& name) const {
  const auto it = std::find(header.begin(), header.end(), name);
  if (it == header.end()) throw std::out_of_range("metrics.csv has no column '" + name + "'");
  const auto at = static_cast<std::size_t>(it - header.begin());
  std::vector<std::string> out;
  for (const auto& row : rows) out.push_back(row[at]);
  return out;
}

std::vector<std::string> CsvTable::loggedAt(const std::string& name) const {
  const auto values = column(name), epochs = column("epoch"), steps = column("step");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (!values[i].empty()) out.push_back(epochs[i] + "," + steps[i]);
  return out;
}

double CsvTable::valueAt(const std::string& name, std::int64_t step) const {
  const auto values = column(name), steps = column("step");
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (!values[i].empty() && steps[i] == std::to_string(step)) return std::stod(values[i]);
  throw std::out_of_range("metrics.csv has no " + name + " at step " + std::to_string(step));
}

CsvTable readCsv(const std::filesystem::path& path) {
  std::istringstream in(readFile(path));
  CsvTable t;
  std::string line;
  if (std::getline(in, line)) t.header = splitCells(line);
  for (int n = 2; std::getline(in, line); ++n) {
    t.rows.push_back(splitCells(line));
    if (t.rows.back().size() != t.header.size())
      throw std::runtime_error(path.string() + ":" + std::to_string(n) + ": " + std::to_string(t.rows.back().size()) +
                               " cells under a header of " + std::to_string(t.header.size()));
  }
  return t;
}

core::checkpoint::Checkpoint readCheckpoint(const std::filesystem::path& path) {
  return core::checkpoint::decodeSafetensors(readFile(path), path.string());
}

void expectSameState(core::checkpoint::Checkpoint got, core::checkpoint::Checkpoint want) {
  for (const char* key : {"epoch", "global_step", "batches_done", "optimizer", "scheduler", "precision_state"})
    EXPECT_EQ(got.meta(key), want.meta(key)) << key;
  // Encoded without metadata, equal bytes are equal names, dtypes, shapes and values.
  got.metadata.clear();
  want.metadata.clear();
  EXPECT_TRUE(core::checkpoint::encodeSafetensors(got) == core::checkpoint::encodeSafetensors(want))
      << "the tensors differ";
}

std::vector<std::string> fileNames(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

RunResult TrainRunTest::boring(const std::string& subcommand, const std::vector<std::string>& args) {
  std::vector<std::string> full{subcommand, "-c", boringConfig(), "--trainer.enable_progress_bar=false",
                                "--trainer.enable_model_summary=false"};
  full.insert(full.end(), args.begin(), args.end());
  return run(full);
}

RunResult TrainRunTest::fitBoring(const std::vector<std::string>& args) {
  RunResult r = boring("fit", args);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  return r;
}

CsvTable TrainRunTest::metrics(const std::string& version_dir) const {
  return readCsv(dir() / version_dir / "metrics.csv");
}

void FashionRunTest::SetUp() {
  const char* kData = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << kData << " (Debian package dataset-fashion-mnist)";
}

std::string FashionRunTest::fashionConfig() {
  return write("fashion.yaml", R"(seed_everything: 7
trainer:
  devices: 1
  enable_progress_bar: false
  enable_model_summary: false
  limit_train_batches: 4
  limit_val_batches: 2
  limit_test_batches: 2
  log_every_n_steps: 2
model:
  class_path: MLPClassifier
  init_args: {hidden: [32], dropout: 0.2}
data: FashionMNISTDataModule
)");
}

}  // namespace hpu::cli::testing
