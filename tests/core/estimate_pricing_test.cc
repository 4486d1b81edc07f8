// The estimate's pricing and reports apart from tracing (core/estimate):
// a recorded step priced under a Gaudi model, a traced job priced into one
// EstimateResult, and the text and JSON reports rendered from it. The
// traces here are written by hand, as a planner's would be traced.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpu/core/estimate/op_costs.h"
#include "hpu/core/estimate/plan.h"
#include "hpu/core/estimate/pricing.h"
#include "hpu/core/estimate/report.h"
#include "hpu/core/estimate/step_time.h"

namespace hpu::core::estimate {
namespace {

using ::testing::HasSubstr;
using device::DType;
using Stream = RecordedStep::Stream;

constexpr std::uint64_t kGiB = 1ull << 30;

// A step of one linear [tokens, width] x [width, width] in bf16, forward and
// backward, then a blocking all-reduce of its weight's gradient over
// `group` ranks.
RecordedStep linearStep(std::int64_t tokens, std::int64_t width, int group) {
  RecordedStep s;
  s.op_kinds.push_back({"linear",
                        {{{tokens, width}, DType::kBFloat16, true}, {{width, width}, DType::kBFloat16, true}},
                        "bfloat16[" + std::to_string(tokens) + "," + std::to_string(width) + "] bfloat16[" +
                            std::to_string(width) + "," + std::to_string(width) + "]"});
  s.collectives.push_back({device::CollectiveKind::kAllreduce, 2.0 * static_cast<double>(width * width), group, 1});
  s.events = {{Stream::kCompute, false, 0}, {Stream::kCompute, true, 0}, {Stream::kBlocking, false, 0}};
  s.graphs = 1;
  return s;
}

OpPrice linearPrice(const device::GaudiModel& model, std::int64_t tokens, std::int64_t width) {
  const std::vector<std::int64_t> x{tokens, width}, w{width, width};
  const std::vector<device::OperandInfo> operands{{x, DType::kBFloat16, true}, {w, DType::kBFloat16, true}};
  return priceOp(model, "linear", operands);
}

TEST(StepPricing, ARecordedStepIsPricedUnderTheModelItIsGiven) {
  const RecordedStep step = linearStep(4096, 4096, 2);
  device::Calibration slow_mme;
  slow_mme.mme = 0.5;
  double linear_seconds[2] = {};
  int i = 0;
  for (const device::Calibration& c : {device::Calibration{}, slow_mme}) {
    const device::GaudiModel model(device::Generation::kGaudi2, {2, 1}, c);
    const PricedStep priced = priceStep(step, model);
    const OpPrice linear = linearPrice(model, 4096, 4096);
    ASSERT_EQ(priced.ops.size(), 2u);
    // Most expensive first: the backward's two products, then the forward's one.
    EXPECT_EQ(priced.ops[0].op, "linear_backward");
    EXPECT_EQ(priced.ops[0].seconds, linear.backward.seconds);
    EXPECT_EQ(priced.ops[1].op, "linear");
    EXPECT_EQ(priced.ops[1].seconds, linear.forward.seconds);
    EXPECT_EQ(priced.time.breakdown.matrix, linear.forward.seconds + linear.backward.seconds);
    EXPECT_DOUBLE_EQ(priced.time.breakdown.exposed_comm,
                     model.collectiveSeconds(device::CollectiveKind::kAllreduce, 2.0 * 4096 * 4096, 2, 1));
    EXPECT_EQ(priced.time.blocking_collectives, 1);
    EXPECT_EQ(priced.time.breakdown.host, model.hostSecondsPerGraph());
    EXPECT_EQ(priced.time.seconds, priced.time.breakdown.total());
    linear_seconds[i++] = priced.ops[1].seconds;
  }
  EXPECT_NEAR(linear_seconds[1], 2 * linear_seconds[0], 1e-12) << "a product bound by the matrix engine";
}

TEST(StepPricing, ACollectiveOfOneRankIsFree) {
  const device::GaudiModel model(device::Generation::kGaudi2, {1, 1});
  const PricedStep priced = priceStep(linearStep(64, 64, 1), model);
  EXPECT_EQ(priced.time.collectives, 0);
  EXPECT_EQ(priced.time.breakdown.exposed_comm, 0.0);
}

// Two pipeline stages of one rank each, 4 micro-batches: stage 1 does the
// larger product, so its step is the job's, plus 1F1B's bubble.
TracedJob twoStages() {
  TracedJob job;
  job.shape.devices = 2;
  job.shape.world = 2;
  job.shape.stages = 2;
  job.shape.accumulate = 4;
  job.shape.micro_batch = 2;
  job.shape.tokens_per_sample = 1024;
  job.shape.strategy = "ModelParallelStrategy";
  job.shape.precision = "bf16-mixed";
  job.shape.matrix_dtype = DType::kBFloat16;
  RankTrace first{.rank = 0, .last_rank = 0, .stage = 0, .persistent = 3ull * kGiB, .peak = 5ull * kGiB};
  first.step = linearStep(2048, 1024, 1);
  first.parameters = 1000;
  RankTrace second{.rank = 1, .last_rank = 1, .stage = 1, .persistent = 4ull * kGiB, .peak = 7ull * kGiB};
  second.step = linearStep(2048, 4096, 1);
  second.parameters = 2000;
  job.ranks = {first, second};
  return job;
}

TEST(JobPricing, TheSlowestStageSetsTheStepWithOneF1BsBubble) {
  const TracedJob job = twoStages();
  const device::GaudiModel model(device::Generation::kGaudi2, job.shape.topology());
  const EstimateResult r = priceJob(job, model, {6ull * kGiB, "a test's 6 GiB"});
  const PricedStep first = priceStep(job.ranks[0].step, model), second = priceStep(job.ranks[1].step, model);
  ASSERT_GT(second.time.seconds, first.time.seconds);
  EXPECT_EQ(r.step_rank, 1);
  EXPECT_EQ(r.step_stage, 1);
  EXPECT_EQ(r.step_rank_seconds, second.time.seconds);
  const StepBreakdown& b = second.time.breakdown;
  EXPECT_DOUBLE_EQ(r.step.breakdown.pipeline_bubble, (b.matrix + b.vector + b.host) / 4);
  EXPECT_DOUBLE_EQ(r.step.seconds, second.time.seconds + r.step.breakdown.pipeline_bubble);
  EXPECT_EQ(r.ops.size(), second.ops.size());
  EXPECT_EQ(r.parameters, 3000) << "each stage's parameters";
  // Throughput: 2 x 4 sequences of 1024 tokens a step; MFU: the stages' average matrix FLOPs.
  EXPECT_DOUBLE_EQ(r.throughput, 2.0 * 4 * 1024 / r.step.seconds);
  EXPECT_DOUBLE_EQ(r.mfu, (first.time.matrix_flops + second.time.matrix_flops) / 2 /
                              (r.step.seconds * model.matrixPeakFlops(DType::kBFloat16)));
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[1].activations, 3ull * kGiB);
  EXPECT_EQ(r.peak, 7ull * kGiB);
  EXPECT_FALSE(r.fits);
  EXPECT_TRUE(r.suggestions.empty()) << "pricing traces nothing";
  EXPECT_EQ(r.generation, "gaudi2");
  EXPECT_FALSE(r.assumptions.empty());
}

// Both reports show the result's own values: an activations figure and a
// throughput that pricing would not have given, and a suggestion.
TEST(EstimateReports, TextAndJsonRenderTheResultsValues) {
  const TracedJob job = twoStages();
  EstimateResult r =
      priceJob(job, device::GaudiModel(device::Generation::kGaudi2, job.shape.topology()), {6ull * kGiB, "6 GiB"});
  r.ranks[0].activations = 3 * kGiB / 2;
  r.throughput = 1234;
  r.suggestions = {{"trainer.strategy: hpu_deepspeed_stage_3", 5ull * kGiB, true}};
  const std::string text = textReport(r, false);
  const nlohmann::json json = jsonReport(r);
  EXPECT_THAT(text, HasSubstr("  throughput            1234 tokens/s\n"));
  EXPECT_EQ(json["tokens_per_s"], 1234.0);
  EXPECT_THAT(text, HasSubstr("activations 1.50 GiB\n"));
  EXPECT_EQ(json["per_rank"][0]["activations_bytes"], 3ull * kGiB / 2);
  EXPECT_THAT(text, HasSubstr("  fits                  NO\n    try trainer.strategy: hpu_deepspeed_stage_3: peak "
                              "5.00 GiB (fits)\n"));
  EXPECT_EQ(json["suggestions"],
            nlohmann::json::array({"trainer.strategy: hpu_deepspeed_stage_3: peak 5.00 GiB (fits)"}));
  EXPECT_THAT(text, HasSubstr("  most expensive ops (rank 1, stage 1, one step):\n"));
  EXPECT_EQ(json["ops"].size(), r.ops.size());
  EXPECT_THAT(text, ::testing::Not(HasSubstr("assumptions:")));
  EXPECT_THAT(textReport(r, true), HasSubstr("  assumptions:\n"));
}

// Interleaved 1F1B, priced for a plan's winner: v virtual stages divide the
// bubble by v and multiply the stage transfers compute waits for by v, for
// every v that divides a stage's layers, when the micro-batches are a
// multiple of the stages.
TEST(PlanInterleaving, DividesTheBubbleAndMultipliesTheTransfers) {
  PlannedLayout p;
  p.layout.pipeline_stages = 4;
  p.layout.accumulate = 8;
  p.figures.step.breakdown.matrix = 8.9;
  p.figures.step.breakdown.pipeline_bubble = 1.0;
  p.figures.step.breakdown.exposed_comm = 0.1;
  p.figures.step.pipeline_transfers = 0.1;
  p.figures.step.seconds = p.figures.step.breakdown.total();
  p.figures.throughput = 1000;  // 10,000 tokens a 10 s step
  const std::vector<Interleaving> all = interleavings(p, 6);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].virtual_stages, 2);
  EXPECT_DOUBLE_EQ(all[0].bubble, 0.5);
  EXPECT_DOUBLE_EQ(all[0].transfers, 0.2);
  EXPECT_DOUBLE_EQ(all[0].throughput, 10000 / (10 - 0.5 + 0.1));
  EXPECT_EQ(all[1].virtual_stages, 3);
  EXPECT_EQ(all[2].virtual_stages, 6);
  EXPECT_DOUBLE_EQ(all[2].throughput, 10000 / (10 - 1.0 + 1.0 / 6 - 0.1 + 0.6));
  p.layout.accumulate = 6;  // not a multiple of the 4 stages
  EXPECT_TRUE(interleavings(p, 6).empty());
  p.layout.accumulate = 8;
  p.layout.pipeline_stages = 1;
  EXPECT_TRUE(interleavings(p, 6).empty());
}

// A plan's interleavings are of its fastest layout without virtual stages:
// the search ranks the config's own interleaved layout with the others, and
// the report names the layout the rows are of.
TEST(PlanInterleaving, AreOfTheFastestLayoutWithoutVirtualStages) {
  PlanResult r;
  EXPECT_EQ(fastestWithoutVirtualStages(r.fitting), nullptr);
  PlannedLayout interleaved;
  interleaved.layout.pipeline_stages = 4;
  interleaved.layout.virtual_stages = 2;
  interleaved.layout.accumulate = 8;
  r.fitting = {interleaved};
  EXPECT_EQ(fastestWithoutVirtualStages(r.fitting), nullptr);
  PlannedLayout plain = interleaved;
  plain.layout.virtual_stages = 1;
  plain.figures.step.breakdown.pipeline_bubble = 1.0;
  plain.figures.step.pipeline_transfers = 0.1;
  plain.figures.step.seconds = 10;
  plain.figures.throughput = 1000;
  PlannedLayout slower = plain;
  slower.layout.pipeline_stages = 2;
  r.fitting = {interleaved, plain, slower};
  ASSERT_EQ(fastestWithoutVirtualStages(r.fitting), &r.fitting[1]);
  r.interleaved = interleavings(r.fitting[1], 6);
  EXPECT_THAT(textPlanReport(r, 3), HasSubstr("  " + describe(plain.layout) +
                                              " with interleaved 1F1B (virtual pipeline stages), bubble 1.00 s and "
                                              "stage transfers 100.0 ms without:\n"
                                              "        2 virtual stages a rank: "));
}

}  // namespace
}  // namespace hpu::core::estimate
