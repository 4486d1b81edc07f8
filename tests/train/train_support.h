// What the train suite reads back from a run of hpu-train: metrics.csv as a
// table, checkpoints decoded with hpu_core, directory listings, and the
// fixture TrainRunTest, which runs the binary on the BoringModel config.
// Not thread-safe (as HpuTrainTest).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu_train_runner.h"

namespace hpu::cli::testing {

// A CSV file with a header line; cells are kept as written.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  // The cells of `column`, one per row ("" where the row has none). Throws
  // std::out_of_range naming the column if the header lacks it.
  std::vector<std::string> column(const std::string& name) const;
  // The rows whose `column` cell is not empty, as "epoch,step" pairs
  // ("0,31"): where a metric was logged.
  std::vector<std::string> loggedAt(const std::string& name) const;
  // The value of `name` in the row logged at `step` (the first such row
  // with a value). Throws std::out_of_range if there is none.
  double valueAt(const std::string& name, std::int64_t step) const;
};

// REQUIRES: `path` holds a CSV file whose cells contain no commas or quotes
// (what CSVLogger writes). Throws std::runtime_error naming a malformed line.
CsvTable readCsv(const std::filesystem::path& path);

// Decodes a checkpoint file (hpu_train.crc32 checked).
core::checkpoint::Checkpoint readCheckpoint(const std::filesystem::path& path);

// Expects every tensor (model.* and optimizer.*) equal bit for bit, and the
// same training state (epoch, step, optimizer, scheduler, precision).
void expectSameState(core::checkpoint::Checkpoint got, core::checkpoint::Checkpoint want);

// The names of the regular files in `dir`, sorted; empty if `dir` is absent.
std::vector<std::string> fileNames(const std::filesystem::path& dir);

// Every test runs BoringModel on RandomDataModule (64 samples, batches of 2:
// 32 batches per epoch, the same 64 samples for validation) without progress
// bar or model summary unless it asks for them.
class TrainRunTest : public HpuTrainTest {
 protected:
  // `subcommand -c boring.yaml <quiet flags> args...`.
  RunResult boring(const std::string& subcommand, const std::vector<std::string>& args);
  // boring("fit", args), expecting exit 0.
  RunResult fitBoring(const std::vector<std::string>& args);
  CsvTable metrics(const std::string& version_dir = "lightning_logs/version_0") const;
};

// Runs on the real Fashion-MNIST files (skipped when they are not installed).
class FashionRunTest : public TrainRunTest {
 protected:
  void SetUp() override;
  // Writes fashion.yaml, a small real run: an MLP (dropout 0.2, Adam) on 4
  // batches of 64 images per epoch, 2 validation and 2 test batches, seed 7,
  // metrics every 2 steps; returns its name.
  std::string fashionConfig();
};

}  // namespace hpu::cli::testing
