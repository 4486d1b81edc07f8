// Exit codes as scripts see them: 0 ok, 2 config or usage error (nothing
// ran), 1 a failure at run time, with the message on stderr.
#include <filesystem>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

using ExitCodesTest = HpuTrainTest;

TEST_F(ExitCodesTest, SuccessfulRunsExitZero) {
  const RunResult fit = run({"fit", "-c", boringConfig(), "--trainer.max_steps=4", "--trainer.logger=false",
                             "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false"});
  EXPECT_EQ(fit.exit_code, 0) << fit.describe();
  EXPECT_EQ(fit.err, "");
  const RunResult test = run({"test", "-c", boringConfig(), "--trainer.enable_progress_bar=false"});
  EXPECT_EQ(test.exit_code, 0) << test.describe();
}

TEST_F(ExitCodesTest, ConfigErrorExitsTwo) {
  const RunResult r = run({"fit", "-c", boringConfig(), "--trainer.max_epochs=-5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: command line: trainer.max_epochs: -5 is out of range; must be >= -1\n");
}

TEST_F(ExitCodesTest, MissingDataFailsAtRunTimeWithThePath) {
  std::filesystem::create_directory(dir() / "empty");
  const std::string data_dir = (dir() / "empty").string();
  const RunResult r = run({"fit", "--model", "MLPClassifier", "--data", "FashionMNISTDataModule", "--data.data_dir",
                           data_dir, "--trainer.devices=1", "--trainer.logger=false"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err, "error: missing Fashion-MNIST file: neither " + data_dir + "/train-images-idx3-ubyte.gz nor " +
                       data_dir +
                       "/train-images-idx3-ubyte exists (set data.init_args.data_dir; Debian ships it in the "
                       "dataset-fashion-mnist package)\n");
}

}  // namespace
}  // namespace hpu::cli::testing
