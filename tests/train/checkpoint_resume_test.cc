// Checkpoints through the binary: a run interrupted and resumed with
// --ckpt_path (a path, or last) ends with the same bits as an uninterrupted
// one, from the end of an epoch or from inside one; files are replaced by
// rename; truncated, altered, missing or mismatched files are refused with
// the path and the reason.
#include <gmock/gmock.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using core::checkpoint::Checkpoint;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The rows of epochs >= `from`.
std::vector<std::vector<std::string>> rowsFrom(const CsvTable& t, int from) {
  std::vector<std::vector<std::string>> out;
  const auto epochs = t.column("epoch");
  for (std::size_t i = 0; i < t.rows.size(); ++i)
    if (std::stoi(epochs[i]) >= from) out.push_back(t.rows[i]);
  return out;
}

// The Fashion-MNIST MLP with state everywhere: Adam, a StepLR halving the
// rate every epoch, dropout, shuffled data; 4 steps per epoch. One
// ModelCheckpoint keeps the newest epoch and last.ckpt, another saves every
// 5 steps (inside epochs 1 and 2).
class ResumeTest : public FashionRunTest {
 protected:
  RunResult fit(const std::string& max_epochs, const std::string& ckpt_path = "") {
    std::vector<std::string> args{"fit",
                                  "-c",
                                  fashionConfig(),
                                  "-c",
                                  write("resume.yaml", R"(trainer:
  callbacks:
    - {class_path: ModelCheckpoint, init_args: {save_last: true}}
    - {class_path: ModelCheckpoint, init_args: {every_n_train_steps: 5, save_top_k: -1}}
optimizer: {class_path: Adam, init_args: {lr: 0.01}}
lr_scheduler: {class_path: StepLR, init_args: {step_size: 1, gamma: 0.5}}
)"),
                                  "--trainer.max_epochs=" + max_epochs};
    if (!ckpt_path.empty()) args.insert(args.end(), {"--ckpt_path", ckpt_path});
    RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return r;
  }
  Checkpoint checkpoint(const std::string& version, const std::string& name) const {
    return readCheckpoint(dir() / "lightning_logs" / version / "checkpoints" / name);
  }
};

TEST_F(ResumeTest, AnInterruptedRunResumesToTheSameBits) {
  fit("3");  // version_0: uninterrupted
  EXPECT_THAT(fileNames(dir() / "lightning_logs/version_0/checkpoints"),
              ElementsAre("epoch=1-step=5.ckpt", "epoch=2-step=10.ckpt", "epoch=2-step=12.ckpt", "last.ckpt"));
  const Checkpoint reference = checkpoint("version_0", "last.ckpt");
  ASSERT_EQ(reference.meta("global_step"), "12");
  const CsvTable reference_metrics = metrics();

  fit("1");  // version_1: stopped after the first epoch
  EXPECT_EQ(checkpoint("version_1", "last.ckpt").meta("global_step"), "4");
  fit("3", "last");  // version_2: resumes version_1's last.ckpt, the newest
  expectSameState(checkpoint("version_2", "last.ckpt"), reference);
  EXPECT_EQ(rowsFrom(metrics("lightning_logs/version_2"), 0), rowsFrom(reference_metrics, 1))
      << "the resumed epochs log what the uninterrupted run logged";

  // From inside epoch 1 (after its first batch): the same data order,
  // dropout masks, optimizer and scheduler state.
  const Checkpoint inside = checkpoint("version_0", "epoch=1-step=5.ckpt");
  ASSERT_EQ(inside.meta("batches_done"), "1");
  fit("3", "lightning_logs/version_0/checkpoints/epoch=1-step=5.ckpt");  // version_3
  expectSameState(checkpoint("version_3", "last.ckpt"), reference);
  EXPECT_EQ(rowsFrom(metrics("lightning_logs/version_3"), 0), rowsFrom(reference_metrics, 1));
}

TEST_F(ResumeTest, ResumingAFinishedRunTrainsNoFurther) {
  fit("2");
  const RunResult again = fit("2", "lightning_logs/version_0/checkpoints/last.ckpt");
  EXPECT_THAT(fileNames(dir() / "lightning_logs/version_1/checkpoints"), IsEmpty());
  EXPECT_FALSE(std::filesystem::exists(dir() / "lightning_logs/version_1/metrics.csv")) << again.describe();
}

// ------------------------------------------------------------------ refused files (BoringModel checkpoints)

class CheckpointFileTest : public TrainRunTest {
 protected:
  void SetUp() override { fitBoring({"--trainer.max_epochs=1"}); }
  static constexpr const char* kSaved = "lightning_logs/version_0/checkpoints/epoch=0-step=32.ckpt";
  RunResult testWith(const std::string& ckpt, std::vector<std::string> args = {}) {
    args.insert(args.end(), {"--ckpt_path", ckpt, "--trainer.logger=false"});
    return boring("test", args);
  }
  // What refusing `file` for its CRC-32 prints. REQUIRES: `file` has no regex metacharacters but '.'.
  static std::regex checksumMismatch(std::string file) {
    file = std::regex_replace(file, std::regex("\\."), "\\.");
    return std::regex("error: " + file +
                      " is not a valid checkpoint: checksum mismatch \\(stored [0-9a-f]{8}, computed [0-9a-f]{8}\\): "
                      "the file was altered or truncated\n");
  }
};

TEST_F(CheckpointFileTest, TheIntactFileEvaluates) {
  const RunResult r = testWith(kSaved);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

TEST_F(CheckpointFileTest, ATruncatedFileIsRefused) {
  const std::string bytes = read(kSaved);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  write("head.ckpt", bytes.substr(0, 100));
  const RunResult head = testWith("head.ckpt");
  EXPECT_EQ(head.exit_code, 1) << head.describe();
  EXPECT_EQ(head.err, "error: head.ckpt is not a valid checkpoint: header length " + std::to_string(header) +
                          " exceeds the file's 100 bytes (truncated?)\n");

  write("cut.ckpt", bytes.substr(0, bytes.size() - 10));
  const RunResult cut = testWith("cut.ckpt");
  EXPECT_EQ(cut.exit_code, 1) << cut.describe();
  EXPECT_TRUE(std::regex_match(cut.err, checksumMismatch("cut.ckpt"))) << cut.err;
}

TEST_F(CheckpointFileTest, AnAlteredByteIsRefused) {
  std::string bytes = read(kSaved);
  bytes[bytes.size() - 5] ^= 0x01;  // inside the last tensor's data
  write("flipped.ckpt", bytes);
  const RunResult r = testWith("flipped.ckpt");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(std::regex_match(r.err, checksumMismatch("flipped.ckpt"))) << r.err;
}

TEST_F(CheckpointFileTest, MissingOrMismatchedCheckpoints) {
  const RunResult missing = testWith("nope.ckpt");  // a config error: nothing ran
  EXPECT_EQ(missing.exit_code, 2) << missing.describe();
  EXPECT_EQ(missing.err, "error: command line: ckpt_path: no such file: " + (dir() / "nope.ckpt").string() +
                             " (a relative path given here is read from the working directory)\n");

  const RunResult shape = testWith(kSaved, {"--model.out_features=3"});
  EXPECT_EQ(shape.exit_code, 1) << shape.describe();
  EXPECT_EQ(shape.err, std::string("error: ") + kSaved +
                           ": 'model.layer.weight' has shape [2, 32] in the checkpoint but [3, 32] in the model\n");

  const RunResult optimizer = boring("fit", {"--trainer.max_epochs=2", "--ckpt_path", kSaved, "--optimizer=Adam"});
  EXPECT_EQ(optimizer.exit_code, 1) << optimizer.describe();
  EXPECT_EQ(optimizer.err, std::string("error: ") + kSaved + " was trained with SGD, this run uses Adam\n");
}

TEST_F(CheckpointFileTest, WeightsOnlyCheckpointsEvaluateButDoNotResume) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.dirpath=weights",
             "--trainer.callbacks.save_weights_only=true"});
  const Checkpoint weights = readCheckpoint(dir() / "weights/epoch=0-step=32.ckpt");
  EXPECT_EQ(weights.metadata.count("optimizer"), 0u);
  EXPECT_EQ(testWith("weights/epoch=0-step=32.ckpt").exit_code, 0);
  const RunResult r = boring("fit", {"--trainer.max_epochs=2", "--ckpt_path", "weights/epoch=0-step=32.ckpt"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err,
            "error: weights/epoch=0-step=32.ckpt holds weights only (save_weights_only); it cannot resume "
            "training\n");
}

TEST_F(CheckpointFileTest, LastWithoutALastCheckpointStartsFromScratchSayingWhereItLooked) {
  const RunResult r = boring("fit", {"--trainer.max_epochs=1", "--trainer.log_every_n_steps=16", "--ckpt_path", "last"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err,
            "warning: ckpt_path=last: no last.ckpt under ./lightning_logs, so no checkpoint is loaded "
            "(ModelCheckpoint writes one with save_last: true)\n");
  // SetUp's run is version_0 (without last.ckpt); this one trained from scratch.
  EXPECT_TRUE(std::filesystem::exists(dir() / "lightning_logs/version_1/checkpoints/epoch=0-step=32.ckpt"));
  const RunResult no_logger = boring("test", {"--ckpt_path", "last", "--trainer.logger=false"});
  EXPECT_EQ(no_logger.exit_code, 0) << no_logger.describe();
  EXPECT_EQ(no_logger.err,
            "warning: ckpt_path=last: no last.ckpt under ./checkpoints, so no checkpoint is loaded "
            "(ModelCheckpoint writes one with save_last: true)\n");
  const RunResult best = boring("test", {"--ckpt_path", "best", "--trainer.logger=false"});
  EXPECT_EQ(best.exit_code, 2) << best.describe();
  EXPECT_EQ(best.err,
            "error: ckpt_path=best: no best checkpoint is known and no last.ckpt under ./checkpoints; pass "
            "a checkpoint path instead\n");
}

// best falls back on the best file the newest last.ckpt's ModelCheckpoint
// state records; when that file is gone, the Trainer's stages and the
// commands that build no Trainer name the last.ckpt that records none.
TEST_F(CheckpointFileTest, BestWhoseRecordedFileIsGoneNamesTheLastCheckpointThatRecordsIt) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.save_last=true"});
  const std::string checkpoints = "lightning_logs/version_1/checkpoints/";  // after SetUp's run
  ASSERT_TRUE(std::filesystem::remove(dir() / (checkpoints + "epoch=0-step=32.ckpt")));
  const RunResult test = boring("test", {"--ckpt_path", "best"});
  EXPECT_EQ(test.exit_code, 2) << test.describe();
  EXPECT_EQ(test.err, "error: ckpt_path=best: no ModelCheckpoint of this process knows a best checkpoint, and the "
                      "state of ./" + checkpoints + "last.ckpt records none (ModelCheckpoint records one with monitor "
                      "set); pass a checkpoint path\n");
  const RunResult consolidate = run({"consolidate", "best", "whole.ckpt"});
  EXPECT_EQ(consolidate.exit_code, 2) << consolidate.describe();
  EXPECT_EQ(consolidate.err, "error: consolidate INPUT best: the ModelCheckpoint state of " + checkpoints +
                                 "last.ckpt records no best checkpoint; give the checkpoint file\n");
}

TEST_F(CheckpointFileTest, EvaluatingACheckpointLogsAtEpochZeroStepZero) {
  fitBoring({"--trainer.max_epochs=2", "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.save_last=true"});
  const RunResult r = boring("test", {"--ckpt_path", "last"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(metrics("lightning_logs/version_2").loggedAt("test_loss"),
              ElementsAre("0,0"));  // after SetUp's and the fit
}

TEST_F(CheckpointFileTest, AResumedModelCheckpointKnowsTheFileItResumedFrom) {
  const auto fitTop1 = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--trainer.logger=false", "--trainer.callbacks+=ModelCheckpoint",
                             "--trainer.callbacks.dirpath=ckpts"});
    fitBoring(args);
  };
  fitTop1({"--trainer.max_epochs=1"});
  // The file's own callback state already counts it as the best.
  const auto callbacks = nlohmann::json::parse(readCheckpoint(dir() / "ckpts/epoch=0-step=32.ckpt").meta("callbacks"));
  const auto state = nlohmann::json::parse(
      callbacks.at("ModelCheckpoint{'monitor': None, 'mode': 'min', 'every_n_train_steps': 0, 'every_n_epochs': 1}")
          .get<std::string>());
  EXPECT_EQ(state.at("best_model_path"), "ckpts/epoch=0-step=32.ckpt");
  EXPECT_EQ(state.at("kept").size(), 1u);
  // So the resumed run, keeping the newest, replaces it.
  fitTop1({"--trainer.max_epochs=2", "--ckpt_path", "ckpts/epoch=0-step=32.ckpt"});
  EXPECT_THAT(fileNames(dir() / "ckpts"), ElementsAre("epoch=1-step=64.ckpt"));
}

TEST_F(CheckpointFileTest, SavingReplacesFilesByRenameAndResumesTheCallbackState) {
  const auto fitWithLast = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--trainer.logger=false", "--trainer.callbacks+=ModelCheckpoint",
                             "--trainer.callbacks.dirpath=ckpts", "--trainer.callbacks.save_last=true"});
    fitBoring(args);
  };
  fitWithLast({"--trainer.max_epochs=1"});
  EXPECT_THAT(fileNames(dir() / "ckpts"), ElementsAre("epoch=0-step=32.ckpt", "last.ckpt"));
  std::filesystem::create_hard_link(dir() / "ckpts/last.ckpt", dir() / "epoch0.ckpt");
  const std::string before = read("epoch0.ckpt");

  // `last` finds ckpts/last.ckpt through the ModelCheckpoint's dirpath.
  fitWithLast({"--trainer.max_epochs=2", "--ckpt_path", "last"});
  // The resumed callback knew epoch 0's file: keeping the newest one, it removed it.
  EXPECT_THAT(fileNames(dir() / "ckpts"), ElementsAre("epoch=1-step=64.ckpt", "last.ckpt"));
  EXPECT_EQ(readCheckpoint(dir() / "ckpts/last.ckpt").meta("global_step"), "64");
  // The old inode still holds the old file, whole: last.ckpt was renamed over, not rewritten.
  EXPECT_EQ(read("epoch0.ckpt"), before);
  EXPECT_EQ(readCheckpoint(dir() / "epoch0.ckpt").meta("global_step"), "32");
}

TEST_F(CheckpointFileTest, ARestartAfterKillsKeepsSaveTopKAndRemovesOnlyDeadWritersTemporaries) {
  const auto fitWithLast = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--trainer.logger=false", "--trainer.callbacks+=ModelCheckpoint",
                             "--trainer.callbacks.dirpath=ckpts", "--trainer.callbacks.save_last=true"});
    return fitBoring(args);
  };
  fitWithLast({"--trainer.max_epochs=1"});
  std::filesystem::create_hard_link(dir() / "ckpts/epoch=0-step=32.ckpt", dir() / "epoch0.ckpt");
  fitWithLast({"--trainer.max_epochs=2", "--ckpt_path", "last"});
  ASSERT_THAT(fileNames(dir() / "ckpts"), ElementsAre("epoch=1-step=64.ckpt", "last.ckpt"));
  // What kills leave: epoch 0's file, as a process killed between saving
  // epoch 1's and removing epoch 0's leaves it (last.ckpt, of epoch 1, does
  // not list it), and the temporaries of writers killed mid-write, beside one
  // of a live process (this one).
  std::filesystem::create_hard_link(dir() / "epoch0.ckpt", dir() / "ckpts/epoch=0-step=32.ckpt");
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string prefix = std::string(".tmp-") + host + "-";
  const std::string killed = prefix + std::to_string(dead) + "-epoch=2-step=96.ckpt";
  const std::string live = prefix + std::to_string(::getpid()) + "-last.ckpt";
  write("ckpts/" + killed, "partial");
  write("ckpts/" + live, "being written");

  env()["HPU_LOG_LEVEL"] = "info";
  const RunResult r = fitWithLast({"--trainer.max_epochs=3", "--ckpt_path", "last"});
  EXPECT_THAT(r.err, HasSubstr("removed " + killed + " in ckpts, left by a writer that was killed"));
  EXPECT_THAT(r.err, HasSubstr("removed ckpts/epoch=0-step=32.ckpt: it falls out of save_top_k=1 of the resumed run"));
  EXPECT_THAT(fileNames(dir() / "ckpts"), ElementsAre(live, "epoch=2-step=96.ckpt", "last.ckpt"));
}

}  // namespace
}  // namespace hpu::cli::testing

namespace hpu::cli::testing {
namespace {

// fixtures/boring_format1.ckpt: written by hpu-train at bc0e7d5 (format 1, before core/
// was split into layers) with
//   hpu-train fit --model BoringModel --data RandomDataModule --trainer.max_epochs=2
//     --seed_everything=7 --trainer.callbacks+=ModelCheckpoint --trainer.callbacks.save_last=true
// (last.ckpt), a build for its host's CPU (-march=native: GCC fused a * b + c
// into FMA instructions in the elementwise code). Checkpoints of earlier
// builds must keep loading and resuming: to the same evaluation, and to the
// uninterrupted run up to that rounding.
class EarlierFormatTest : public HpuTrainTest {
 protected:
  std::vector<std::string> boring(const std::string& subcommand, const std::string& max_epochs) const {
    return {subcommand,
            "--model",
            "BoringModel",
            "--data",
            "RandomDataModule",
            "--seed_everything=7",
            "--trainer.max_epochs=" + max_epochs,
            "--trainer.enable_progress_bar=false",
            "--trainer.callbacks+=ModelCheckpoint",
            "--trainer.callbacks.save_last=true"};
  }
  static std::string fixture() { return std::string(HPU_SOURCE_DIR) + "/tests/train/fixtures/boring_format1.ckpt"; }
};

TEST_F(EarlierFormatTest, ACheckpointOfAnEarlierBuildEvaluatesAndResumesToTheUninterruptedRunsBits) {
  std::vector<std::string> validate{"validate",
                                    "--model",
                                    "BoringModel",
                                    "--data",
                                    "RandomDataModule",
                                    "--seed_everything=7",
                                    "--trainer.enable_progress_bar=false",
                                    "--trainer.logger=false",
                                    "--ckpt_path",
                                    fixture()};
  const RunResult v = run(validate);
  ASSERT_EQ(v.exit_code, 0) << v.describe();
  EXPECT_THAT(v.out, ::testing::HasSubstr("val_loss                  0.2063029657")) << v.out;

  std::vector<std::string> resumed = boring("fit", "4");
  resumed.insert(resumed.end(), {"--ckpt_path", fixture()});
  RunResult r = run(resumed);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run(boring("fit", "4"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  Checkpoint from_fixture = readCheckpoint(dir() / "lightning_logs/version_0/checkpoints/last.ckpt");
  Checkpoint uninterrupted = readCheckpoint(dir() / "lightning_logs/version_1/checkpoints/last.ckpt");
  for (const char* key : {"epoch", "global_step", "batches_done", "optimizer"})
    EXPECT_EQ(from_fixture.meta(key), uninterrupted.meta(key)) << key;
  EXPECT_EQ(from_fixture.meta("global_step"), "16");
  ASSERT_EQ(from_fixture.tensors.size(), uninterrupted.tensors.size());
  for (std::size_t t = 0; t < from_fixture.tensors.size(); ++t) {
    const auto& got = from_fixture.tensors[t];
    const auto& want = uninterrupted.tensors[t];
    ASSERT_EQ(got.name, want.name);
    ASSERT_EQ(got.values.size(), want.values.size()) << got.name;
    for (std::size_t i = 0; i < got.values.size(); ++i)
      ASSERT_NEAR(got.values[i], want.values[i], 1e-5 * (1.0 + std::fabs(want.values[i]))) << got.name << " at " << i;
    EXPECT_EQ(got.ints, want.ints) << got.name;
  }
}

}  // namespace
}  // namespace hpu::cli::testing
