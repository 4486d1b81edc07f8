// The DeepSpeed configuration rules of HPUDeepSpeedStrategy without running
// anything: init_args against the DeepSpeed config (a mapping, a JSON file,
// PL_DEEPSPEED_CONFIG_PATH), DeepSpeed's batch rule and its error, bf16/fp16,
// WarmupDecayLR and optimizer parameters, and unsupported keys refused by
// name. The runs themselves are in tests/train/deepspeed_test.cc.
#include "hpu/core/strategies/deepspeed_config.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace hpu::core {
namespace {

using testing::errorOf;

// The canonical init_args of `HPUDeepSpeedStrategy` given as YAML flow
// mapping text, every default filled in as the config loader does.
config::Node initArgs(const std::string& yaml = "{}") {
  const config::Node node = config::loadYamlString("class_path: HPUDeepSpeedStrategy\ninit_args: " + yaml, "t.yaml");
  std::vector<std::string> problems;
  const config::Node canonical = config::normalize(node, config::Type::component({config::ComponentKind::kStrategy}),
                                                   "trainer.strategy", problems);
  EXPECT_TRUE(problems.empty()) << problems.front();
  return *canonical.find("init_args");
}

// Settings for a DeepSpeed config `config` (YAML flow text) with a data
// loader batch of `batch`, the Trainer's accumulation `acc`, `world` ranks.
DeepSpeedSettings resolve(const std::string& config, std::int64_t batch = 4, std::int64_t acc = 1, int world = 2) {
  return resolveDeepSpeed(initArgs("{config: " + config + "}"), {}, batch, acc, world);
}

std::string errorFor(const std::string& config, std::int64_t batch = 4, std::int64_t acc = 1, int world = 2) {
  return errorOf<ConfigError>([&] { resolve(config, batch, acc, world); });
}

constexpr const char* kOrigin = "trainer.strategy.init_args.config: ";

// As Lightning: without a DeepSpeed config the init_arg (true by default)
// goes into the config it makes; a given config says it itself.
TEST(DeepSpeedConfig, UntestedOptimizersAreAllowedByTheInitArgUnlessAConfigIsGiven) {
  EXPECT_TRUE(resolveDeepSpeed(initArgs(), {}, 4, 1, 2).allow_untested_optimizer);
  EXPECT_FALSE(resolveDeepSpeed(initArgs("{zero_allow_untested_optimizer: false}"), {}, 4, 1, 2).allow_untested_optimizer);
  EXPECT_FALSE(resolve("{zero_optimization: {stage: 2}}").allow_untested_optimizer);
  EXPECT_TRUE(resolve("{zero_allow_untested_optimizer: true}").allow_untested_optimizer);
}

TEST(DeepSpeedConfig, InitArgsAloneTakeTheBatchFromTheLoaderAndTheTrainer) {
  const DeepSpeedSettings s = resolveDeepSpeed(initArgs(), {}, 8, 3, 4);
  EXPECT_EQ(s.stage, 2);  // HPUDeepSpeedStrategy's default, as hpu_deepspeed
  EXPECT_FALSE(s.offload_optimizer);
  EXPECT_FALSE(s.offload_parameters);
  EXPECT_EQ(s.micro_batch_size, 8);
  EXPECT_EQ(s.gradient_accumulation_steps, 3);
  EXPECT_EQ(s.train_batch_size, 8 * 3 * 4);
  EXPECT_EQ(s.precision, "");
  EXPECT_FALSE(s.scheduler.has_value());
  EXPECT_EQ(s.optimizer_type, "");

  const DeepSpeedSettings three = resolveDeepSpeed(
      initArgs("{stage: 3, offload_optimizer: true, offload_parameters: true, cpu_checkpointing: true}"), {}, 8, 1, 2);
  EXPECT_EQ(three.stage, 3);
  EXPECT_TRUE(three.offload_optimizer);
  EXPECT_TRUE(three.offload_parameters);
  EXPECT_TRUE(three.cpu_checkpointing);
  // zero_optimization: false is plain data parallelism whatever the stage.
  EXPECT_EQ(resolveDeepSpeed(initArgs("{zero_optimization: false, stage: 3}"), {}, 8, 1, 2).stage, 0);
}

TEST(DeepSpeedConfig, ZeroOptimizationSectionOverridesTheInitArgs) {
  const DeepSpeedSettings s = resolve(
      "{zero_optimization: {stage: 3, offload_optimizer: {device: cpu, pin_memory: true}, "
      "offload_param: {device: cpu}, reduce_bucket_size: 5e5}}");
  EXPECT_EQ(s.stage, 3);
  EXPECT_TRUE(s.offload_optimizer);
  EXPECT_TRUE(s.offload_parameters);
  EXPECT_EQ(s.reduce_bucket_elements, 500000);
  EXPECT_FALSE(resolve("{zero_optimization: {stage: 1, offload_optimizer: {device: none}}}").offload_optimizer);

  EXPECT_EQ(errorFor("{zero_optimization: {stage: 4}}"),
            std::string(kOrigin) + "zero_optimization.stage must be 0, 1, 2 or 3, not 4");
  EXPECT_EQ(errorFor("{zero_optimization: {stage: 2, offload_param: {device: cpu}}}"),
            std::string(kOrigin) + "offload_parameters (offload_param) needs ZeRO stage 3");
  EXPECT_EQ(errorFor("{zero_optimization: {stage: 0, offload_optimizer: {device: cpu}}}"),
            std::string(kOrigin) + "offload_optimizer needs ZeRO stage 1 or higher (set zero_optimization.stage)");
  EXPECT_EQ(errorFor("{zero_optimization: {stage: 3, offload_param: {device: nvme}}}"),
            std::string(kOrigin) + "zero_optimization.offload_param.device=nvme is not supported (use cpu)");
}

TEST(DeepSpeedConfig, BatchRuleHoldsOrFailsWithDeepSpeedsMessage) {
  // All three given and consistent: 16 = 4 x 2 x 2.
  DeepSpeedSettings s =
      resolve("{train_batch_size: 16, train_micro_batch_size_per_gpu: 4, gradient_accumulation_steps: 2}");
  EXPECT_EQ(s.gradient_accumulation_steps, 2);
  EXPECT_EQ(s.train_batch_size, 16);
  // train + micro: accumulation derived, as DeepSpeed does (the seeds' example).
  s = resolve("{train_batch_size: 8, train_micro_batch_size_per_gpu: 2}", 2);
  EXPECT_EQ(s.gradient_accumulation_steps, 2);
  // train + accumulation: micro derived; it must be the loader's batch.
  s = resolve("{train_batch_size: 24, gradient_accumulation_steps: 3}");
  EXPECT_EQ(s.micro_batch_size, 4);
  // micro + accumulation: train derived; the config's accumulation wins over the Trainer's.
  s = resolve("{train_micro_batch_size_per_gpu: 4, gradient_accumulation_steps: 5}", 4, 2);
  EXPECT_EQ(s.train_batch_size, 40);
  EXPECT_EQ(s.gradient_accumulation_steps, 5);

  EXPECT_EQ(errorFor("{train_batch_size: 10, train_micro_batch_size_per_gpu: 4, gradient_accumulation_steps: 1}"),
            std::string(kOrigin) +
                "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                "gradient_acc_step * world_size 10 != 4 * 1 * 2");
  // Only train_batch_size: the loader's batch and the Trainer's accumulation must make it.
  EXPECT_EQ(errorFor("{train_batch_size: 16}", 4, 1, 2),
            std::string(kOrigin) +
                "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                "gradient_acc_step * world_size 16 != 4 * 1 * 2");
  // A derived accumulation that rounds down to zero.
  EXPECT_EQ(errorFor("{train_batch_size: 4, train_micro_batch_size_per_gpu: 4}"),
            std::string(kOrigin) +
                "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                "gradient_acc_step * world_size 4 != 4 * 0 * 2");
  EXPECT_EQ(errorFor("{train_micro_batch_size_per_gpu: 8}", 4),
            std::string(kOrigin) +
                "train_micro_batch_size_per_gpu is 8 but the data loader's batch size (data.init_args.batch_size) "
                "is 4; make them equal");
}

TEST(DeepSpeedConfig, Bf16OrFp16ChoosesTheMixedPrecision) {
  EXPECT_EQ(resolve("{bf16: {enabled: true}, fp16: {enabled: false}}").precision, "bf16-mixed");
  EXPECT_EQ(resolve("{fp16: {enabled: true, loss_scale: 0, initial_scale_power: 16, loss_scale_window: 1000, "
                    "hysteresis: 2, min_loss_scale: 1}}")
                .precision,
            "16-mixed");
  EXPECT_EQ(resolve("{bf16: {enabled: false}}").precision, "");
  // DeepSpeed's loss scaler: dynamic from 2^initial_scale_power, or static.
  const LossScalerOptions ls = resolve("{fp16: {enabled: true, loss_scale: 0, initial_scale_power: 12, "
                                       "loss_scale_window: 500, hysteresis: 3, min_loss_scale: 2}}")
                                   .loss_scaler;
  EXPECT_TRUE(ls.dynamic);
  EXPECT_EQ(ls.initial_scale, 4096.0f);
  EXPECT_EQ(ls.growth_interval, 500);
  EXPECT_EQ(ls.hysteresis, 3);
  EXPECT_EQ(ls.min_scale, 2.0f);
  const LossScalerOptions defaults = resolve("{fp16: {enabled: true}}").loss_scaler;
  EXPECT_EQ(defaults.initial_scale, 65536.0f);
  EXPECT_EQ(defaults.growth_interval, 1000);
  EXPECT_EQ(defaults.hysteresis, 2);
  EXPECT_EQ(defaults.min_scale, 1.0f);
  const LossScalerOptions fixed = resolve("{fp16: {enabled: true, loss_scale: 128}}").loss_scaler;
  EXPECT_FALSE(fixed.dynamic);
  EXPECT_EQ(fixed.initial_scale, 128.0f);
  EXPECT_EQ(errorFor("{fp16: {enabled: true, hysteresis: 0}}").rfind(std::string(kOrigin) + "DeepSpeed config fp16 loss scaling out of range", 0),
            0u);
  EXPECT_EQ(errorFor("{bf16: {enabled: true}, fp16: {enabled: true}}"),
            std::string(kOrigin) + "bf16.enabled and fp16.enabled are both true; enable one");
  EXPECT_EQ(errorFor("{bf16: {enabled: yes please}}"),
            std::string(kOrigin) + "DeepSpeed config 'bf16.enabled' has the wrong type: \"yes please\"");
  // An integer setting takes an integer: a fraction or an exponent past int is refused, not truncated.
  EXPECT_EQ(errorFor("{zero_optimization: {stage: 2.5}}"),
            std::string(kOrigin) + "DeepSpeed config 'zero_optimization.stage' has the wrong type: 2.5");
  EXPECT_EQ(errorFor("{zero_optimization: {stage: 1e30}}"),
            std::string(kOrigin) + "DeepSpeed config 'zero_optimization.stage' has the wrong type: 1e+30");
  EXPECT_EQ(errorFor("{train_batch_size: 99999999999999999999}"),
            std::string(kOrigin) + "DeepSpeed config 'train_batch_size' has the wrong type: 1e+20");
}

TEST(DeepSpeedConfig, WarmupDecayLRTakesItsParameters) {
  const DeepSpeedSettings s = resolve(
      "{scheduler: {type: WarmupDecayLR, params: {warmup_min_lr: 0.02, warmup_max_lr: 0.05, "
      "warmup_num_steps: 4, total_num_steps: 8, warmup_type: linear}}}");
  ASSERT_TRUE(s.scheduler.has_value());
  EXPECT_DOUBLE_EQ(s.scheduler->warmup_min_lr, 0.02);
  EXPECT_DOUBLE_EQ(s.scheduler->warmup_max_lr, 0.05);
  EXPECT_EQ(s.scheduler->warmup_num_steps, 4);
  EXPECT_EQ(s.scheduler->total_num_steps, 8);
  EXPECT_FALSE(s.scheduler->log_warmup);
  // DeepSpeed's defaults: min 0, max 0.001, 1000 warmup steps, log warmup.
  const DeepSpeedSettings d = resolve("{scheduler: {type: WarmupDecayLR, params: {total_num_steps: 5000}}}");
  ASSERT_TRUE(d.scheduler.has_value());
  EXPECT_DOUBLE_EQ(d.scheduler->warmup_min_lr, 0.0);
  EXPECT_DOUBLE_EQ(d.scheduler->warmup_max_lr, 0.001);
  EXPECT_EQ(d.scheduler->warmup_num_steps, 1000);
  EXPECT_TRUE(d.scheduler->log_warmup);

  EXPECT_EQ(errorFor("{scheduler: {type: OneCycle, params: {}}}"),
            std::string(kOrigin) + "scheduler.type OneCycle is not supported (WarmupDecayLR)");
  EXPECT_EQ(errorFor("{scheduler: {type: WarmupDecayLR, params: {warmup_num_steps: 10}}}"),
            std::string(kOrigin) + "scheduler.params.total_num_steps is required for WarmupDecayLR");
  EXPECT_EQ(errorFor("{scheduler: {type: WarmupDecayLR, params: {total_num_steps: 9, warmup_type: cosine}}}"),
            std::string(kOrigin) + "scheduler.params.warmup_type must be log or linear, not cosine");
}

TEST(DeepSpeedConfig, OptimizerSectionIsParsedForModelsThatConfigureNone) {
  const DeepSpeedSettings s = resolve(
      "{optimizer: {type: AdamW, params: {lr: 0.0003, betas: [0.8, 0.95], eps: 1e-6, weight_decay: 0.1}}, "
      "zero_allow_untested_optimizer: true, gradient_clipping: 1.5}");
  EXPECT_EQ(s.optimizer_type, "AdamW");
  EXPECT_DOUBLE_EQ(s.optimizer_params.at("lr"), 0.0003);
  EXPECT_DOUBLE_EQ(s.optimizer_params.at("beta1"), 0.8);
  EXPECT_DOUBLE_EQ(s.optimizer_params.at("beta2"), 0.95);
  EXPECT_DOUBLE_EQ(s.optimizer_params.at("eps"), 1e-6);
  EXPECT_DOUBLE_EQ(s.optimizer_params.at("weight_decay"), 0.1);
  EXPECT_TRUE(s.allow_untested_optimizer);
  ASSERT_TRUE(s.gradient_clipping.has_value());
  EXPECT_DOUBLE_EQ(*s.gradient_clipping, 1.5);

  EXPECT_EQ(errorFor("{optimizer: {type: Lamb, params: {lr: 0.1}}}"),
            std::string(kOrigin) + "optimizer.type Lamb is not supported (Adam, AdamW, SGD)");
  EXPECT_EQ(errorFor("{optimizer: {type: SGD, params: {lr: fast}}}"),
            std::string(kOrigin) + "optimizer.params.lr is not a number");
  EXPECT_EQ(errorFor("{optimizer: {type: Adam, params: {betas: [high, low]}}}"),
            std::string(kOrigin) + "optimizer.params.betas is not a number");
}

TEST(DeepSpeedConfig, UnsupportedKeysAreRefusedByName) {
  EXPECT_EQ(errorFor("{train_batch_sizes: 16}"),
            std::string(kOrigin) +
                "DeepSpeed config key 'train_batch_sizes' is not supported by hpu-train; did you mean "
                "'train_batch_size'? (supported: train_batch_size, train_micro_batch_size_per_gpu, "
                "gradient_accumulation_steps, bf16, fp16, zero_optimization, zero_allow_untested_optimizer, "
                "scheduler, optimizer, gradient_clipping, steps_per_print, wall_clock_breakdown, "
                "activation_checkpointing, communication_data_type, tensor_parallel)");
  EXPECT_EQ(errorFor("{communication_data_type: fp16}"),
            std::string(kOrigin) + "communication_data_type \"fp16\" is not supported by hpu-train (fp32, bf16)");
  const std::string nested = errorFor("{zero_optimization: {stage: 3, stage3_max_live_parameters: 1e9}}");
  EXPECT_TRUE(nested.starts_with(std::string(kOrigin) +
                                 "DeepSpeed config key 'zero_optimization.stage3_max_live_parameters' is not "
                                 "supported by hpu-train"))
      << nested;
  const std::string deeper = errorFor("{fp16: {enabled: true, auto_cast: true}}");
  EXPECT_TRUE(deeper.starts_with(std::string(kOrigin) + "DeepSpeed config key 'fp16.auto_cast' is not supported"))
      << deeper;
  const std::string offload = errorFor("{zero_optimization: {offload_optimizer: {device: cpu, ratio: 0.3}}}");
  EXPECT_TRUE(offload.starts_with(std::string(kOrigin) +
                                  "DeepSpeed config key 'zero_optimization.offload_optimizer.ratio' is not supported"))
      << offload;
  EXPECT_EQ(errorFor("{zero_optimization: 2}"), std::string(kOrigin) + "zero_optimization must be an object");
}

TEST(DeepSpeedConfig, JsonFileFromInitArgsOrEnvironment) {
  testing::TempDir dir;
  const std::string path = dir.file("ds.json");
  testing::writeBytes(path, R"({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1},
                               "activation_checkpointing": {"cpu_checkpointing": true}})");
  const DeepSpeedSettings from_args = resolveDeepSpeed(initArgs("{config: '" + path + "'}"), {}, 4, 1, 2);
  EXPECT_EQ(from_args.stage, 1);
  EXPECT_TRUE(from_args.cpu_checkpointing);

  const Environment env{{"PL_DEEPSPEED_CONFIG_PATH", path}};
  EXPECT_EQ(resolveDeepSpeed(initArgs(), env, 4, 1, 2).stage, 1);
  // init_args.config wins over the environment.
  EXPECT_EQ(resolveDeepSpeed(initArgs("{config: {zero_optimization: {stage: 3}}}"), env, 4, 1, 2).stage, 3);

  // Errors name the file.
  testing::writeBytes(path, R"({"train_micro_batch_size_per_gpu": 8})");
  EXPECT_EQ(errorOf<ConfigError>([&] { resolveDeepSpeed(initArgs(), env, 4, 1, 2); }),
            path +
                ": train_micro_batch_size_per_gpu is 8 but the data loader's batch size "
                "(data.init_args.batch_size) is 4; make them equal");
  testing::writeBytes(path, "stage: 2\n");
  EXPECT_EQ(errorOf<ConfigError>([&] { resolveDeepSpeed(initArgs(), env, 4, 1, 2); }),
            path + ": not a DeepSpeed JSON config (a JSON object)");
}

}  // namespace
}  // namespace hpu::core
