// The lines a Lightning user knows from a run, in Lightning 2.x's words:
// "Seed set to N", why fit stopped, and the log_every_n_steps warning.
#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

using LightningMessagesTest = HpuTrainTest;

TEST_F(LightningMessagesTest, SeedAndStoppingLines) {
  env()["HPU_LOG_LEVEL"] = "info";
  RunResult r = run({"fit", "-c", boringConfig(), "--trainer.max_epochs=2", "--trainer.limit_train_batches=2",
                     "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("info: Seed set to 42\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("info: `Trainer.fit` stopped: `max_epochs=2` reached.\n"), std::string::npos) << r.err;
  r = run({"fit", "-c", boringConfig(), "--trainer.max_steps=3", "--trainer.limit_val_batches=0",
           "--trainer.enable_progress_bar=false"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("info: `Trainer.fit` stopped: `max_steps=3` reached.\n"), std::string::npos) << r.err;
  // An unseeded run seeds nothing and says nothing.
  r = run({"fit", "-c", boringConfig(), "--seed_everything=false", "--trainer.max_epochs=1",
           "--trainer.limit_train_batches=1", "--trainer.limit_val_batches=0"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err.find("Seed set to"), std::string::npos) << r.err;
}

TEST_F(LightningMessagesTest, LogEveryNStepsAboveTheBatchesOfAnEpochWarns) {
  RunResult r = run({"fit", "-c", boringConfig(), "--trainer.max_epochs=1", "--trainer.limit_train_batches=4",
                     "--trainer.limit_val_batches=0"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err,
            "warning: The number of training batches (4) is smaller than the logging interval "
            "Trainer(log_every_n_steps=50). Set a lower value for log_every_n_steps if you want to see logs for the "
            "training epoch.\n");
  // Not with log_every_n_steps within the epoch, nor without loggers.
  r = run({"fit", "-c", boringConfig(), "--trainer.max_epochs=1", "--trainer.limit_train_batches=4",
           "--trainer.limit_val_batches=0", "--trainer.log_every_n_steps=2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "");
  r = run({"fit", "-c", boringConfig(), "--trainer.max_epochs=1", "--trainer.limit_train_batches=4",
           "--trainer.limit_val_batches=0", "--trainer.logger=false"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "");
}

}  // namespace
}  // namespace hpu::cli::testing
