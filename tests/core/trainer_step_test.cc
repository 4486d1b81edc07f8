// The Trainer's one step protocol, pipeline stages or not: under pipeline
// parallelism (a stand-in strategy that runs the schedule's micro-batches in
// order on one stage, for one rank or for two data-parallel ranks as
// threads, and counts the all-reduces a schedule issues) sync_batchnorm sums
// the batch statistics and a loss that depends on no parameter is refused,
// as without stages; micro-batches waiting for their step's last one are
// dropped when the loop feeding them ends by an exception, so the next
// loop's first step runs its own micro-batches only.
#include <gmock/gmock.h>

#include <exception>
#include <mutex>
#include <thread>

#include "hpu/comm/in_memory.h"
#include "hpu/core/callbacks/lambda_callback.h"
#include "hpu/core/module/pipeline_module.h"
#include "hpu/core/strategies/pipeline_work.h"
#include "trainer_support.h"

namespace hpu::core {
namespace {

using testing::SmallImagesData;
using testing::TempDir;

// A pipeline's last stage (which computes the loss) on device `rank`: the
// schedule runs each micro-batch's forward and backward in turn. With
// `replicas`, the stage's data-parallel group (this rank's of it), whose
// all-reduces sum over its ranks; without, one rank.
class StageStandIn final : public Strategy {
 public:
  StageStandIn(int rank, comm::ProcessGroup* replicas)
      : inner_(makeSingleDeviceStrategy(rank)), replicas_(replicas) {}
  std::string name() const override { return "StageStandIn"; }
  void setup(const RunEnvironment& run, device::Platform& platform) override { inner_->setup(run, platform); }
  device::Device& device() override { return inner_->device(); }
  int worldSize() const override { return replicas_ ? replicas_->size() : 1; }
  int globalRank() const override { return replicas_ ? replicas_->rank() : 0; }
  int pipelineStages() const override { return 2; }
  int pipelineStage() const override { return 1; }
  std::vector<double> runPipeline(PipelineWork& work, std::size_t micro_batches, bool backward) override {
    if (backward) runs.push_back(micro_batches);
    scheduling_ = true;
    std::vector<double> losses;
    for (std::size_t i = 0; i < micro_batches; ++i) {
      losses.push_back(work.forward(i, 0, Tensor()).item());
      if (backward) work.backward(i, 0, Tensor());
    }
    scheduling_ = false;
    return losses;
  }
  void allReduceSum(std::span<double> values) override {
    sums_in_schedule += scheduling_;
    if (!replicas_) return;
    std::vector<float> sums(values.begin(), values.end());  // small counts and sums: exact enough
    replicas_->allreduce(sums, comm::ReduceOp::kSum);
    std::copy(sums.begin(), sums.end(), values.begin());
  }

  std::vector<std::size_t> runs;  // micro-batches of each training schedule
  int sums_in_schedule = 0;       // all-reduces while a schedule ran

 private:
  std::unique_ptr<Strategy> inner_;
  comm::ProcessGroup* replicas_;
  bool scheduling_ = false;
};

// BatchNormClassifier as a pipeline stage that is first and last: its
// forwardStage is the loss; with `detached`, a loss of no parameter.
class StagedClassifier final : public LightningModule, public PipelineModule {
 public:
  std::string typeName() const override { return "StagedClassifier"; }
  void configureModel(nn::InitContext& ctx, const ModelInput& input) override {
    classifier_ = registerModule("classifier", std::make_shared<testing::BatchNormClassifier>());
    classifier_->configureModel(ctx, input);
  }
  Tensor trainingStep(const Batch&, std::int64_t) override { return Tensor(); }
  OptimizerConfig configureOptimizers() override { return classifier_->configureOptimizers(); }
  StageInput stageInput(const Batch&) const override { return {}; }
  int chunks() const override { return 1; }
  Tensor forwardStage(const Batch& batch, const Tensor&, int) override {
    const Tensor loss = ops::crossEntropy(classifier_->forward(batch["x"]), batch["y"]);
    return detached ? Tensor::full(loss.device(), {}, 1.0f) : loss;
  }
  void logLoss(std::string_view split, double loss) override { log(std::string(split) + "_loss", loss); }
  std::vector<Tensor> stageSharedParameters() const override { return {}; }

  bool detached = false;

 private:
  std::shared_ptr<testing::BatchNormClassifier> classifier_;
};

constexpr const char* kQuiet =
    "{logger: false, enable_checkpointing: false, enable_progress_bar: false, enable_model_summary: false, "
    "num_sanity_val_steps: 0, limit_val_batches: 0, accumulate_grad_batches: 3";

struct StagedRun {
  TempDir dir;
  device::Platform platform = device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "2"}});
  StageStandIn* stage = nullptr;
  std::unique_ptr<Trainer> trainer;
  StagedClassifier model;
  SmallImagesData data;

  // A Trainer of `options` (kQuiet's and more) with `callbacks`, on rank
  // `rank` of `replicas` (null: one rank).
  StagedRun(const std::string& options, std::vector<std::unique_ptr<Callback>> callbacks = {},
            comm::ProcessGroup* replicas = nullptr) {
    auto strategy = std::make_unique<StageStandIn>(replicas ? replicas->rank() : 0, replicas);
    stage = strategy.get();
    trainer = testing::makeTrainer(dir.path().string(), std::string(kQuiet) + ", " + options + "}",
                                   std::move(callbacks), platform, std::move(strategy));
  }
};

// The all-reduces each of two data-parallel ranks issued while its schedules ran, fitting `options`.
std::vector<int> sumsInScheduleOnTwoRanks(const std::string& options) {
  auto groups = comm::makeInMemoryProcessGroups(2);
  std::vector<int> sums(2);
  std::exception_ptr failure;
  std::mutex mutex;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      try {
        StagedRun run(options, {}, groups[static_cast<std::size_t>(r)].get());
        run.trainer->fit(run.model, run.data, "");
        EXPECT_EQ(run.stage->runs, std::vector<std::size_t>{3});
        sums[static_cast<std::size_t>(r)] = run.stage->sums_in_schedule;
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  for (auto& t : ranks) t.join();
  if (failure) std::rethrow_exception(failure);
  return sums;
}

TEST(TrainerStep, SyncBatchnormSumsTheStatisticsOfEveryMicroBatchUnderPipelineStages) {
  // Each of the step's 3 micro-batches: the batch norm's mean and variance forward, its gradients' sums backward.
  EXPECT_EQ(sumsInScheduleOnTwoRanks("max_steps: 1, sync_batchnorm: true"), (std::vector<int>{9, 9}));
  EXPECT_EQ(sumsInScheduleOnTwoRanks("max_steps: 1"), (std::vector<int>{0, 0}));
}

TEST(TrainerStep, ALossOfNoParameterIsRefusedUnderPipelineStages) {
  StagedRun run("max_steps: 1");
  run.model.detached = true;
  try {
    run.trainer->fit(run.model, run.data, "");
    FAIL() << "fit ran";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "StagedClassifier.forwardStage returned a loss that does not depend on any parameter");
  }
}

// A tuner's training steps (runTrainingSteps) that throw in the middle of an
// optimizer step, then run again: the second run's first step is its own
// three micro-batches, not the first run's leftover and two of its own.
TEST(TrainerStep, AnExceptionInTheMiddleOfAStepLeavesNoMicroBatchBehind) {
  std::vector<std::size_t> runs;
  LambdaHooks hooks;
  hooks.on_fit_start = [&](Trainer& t) {
    int lr_asked = 0;
    EXPECT_THROW(t.runTrainingSteps(
                     1,
                     [&](std::int64_t) {
                       if (++lr_asked == 2) throw std::runtime_error("out of memory before the second micro-batch");
                       return 0.1;
                     },
                     [](std::int64_t, double) { return true; }),
                 std::runtime_error);
    t.runTrainingSteps(1, [](std::int64_t) { return 0.1; }, [](std::int64_t, double) { return true; });
  };
  std::vector<std::unique_ptr<Callback>> callbacks;
  callbacks.push_back(std::make_unique<LambdaCallback>(std::move(hooks)));
  StagedRun run("max_steps: 0", std::move(callbacks));
  run.trainer->fit(run.model, run.data, "");
  EXPECT_EQ(run.stage->runs, std::vector<std::size_t>{3});
}

}  // namespace
}  // namespace hpu::core
