#include "hpu/core/strategies/deepspeed_config.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "hpu/core/base/file_io.h"
#include "hpu/core/base/json_number.h"
#include "hpu/core/config/params.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/base/errors.h"

namespace hpu::core {
namespace {

using nlohmann::json;

// A canonical config node as JSON (free-form dicts keep their scalar text).
json toJson(const config::Node& n) {
  switch (n.kind()) {
    case config::Node::Kind::kNull: return nullptr;
    case config::Node::Kind::kScalar: {
      if (n.quoted()) return n.str();
      if (auto b = config::parseBool(n.str())) return *b;
      if (auto i = config::parseInt(n.str())) return *i;
      if (auto f = config::parseFloat(n.str())) return *f;
      return n.str();
    }
    case config::Node::Kind::kSequence: {
      json a = json::array();
      for (const auto& i : n.items()) a.push_back(toJson(i));
      return a;
    }
    case config::Node::Kind::kMap: {
      json o = json::object();
      for (const auto& [k, v] : n.entries()) o[k] = toJson(v);
      return o;
    }
  }
  return nullptr;
}

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw ConfigError(fmt::format("{}: {}", origin, what));
}

void refuseUnknown(const json& obj, const std::vector<std::string>& known, const std::string& origin,
                   const std::string& prefix) {
  for (const auto& [key, value] : obj.items())
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      fail(origin, fmt::format("DeepSpeed config key '{}{}' is not supported by hpu-train{} (supported: {})", prefix,
                               key, config::didYouMean(key, known), list));
    }
}

template <class T>
T get(const json& obj, const char* key, T fallback, const std::string& origin, const std::string& prefix = "") {
  if (!obj.contains(key) || obj[key].is_null()) return fallback;
  const json& v = obj[key];
  std::optional<T> x;
  if constexpr (std::integral<T> && !std::same_as<T, bool>) {
    x = jsonInteger<T>(v);
  } else if constexpr (std::floating_point<T>) {
    x = jsonFloat<T>(v);
  } else {
    try {
      x = v.get<T>();
    } catch (const json::exception&) {
    }
  }
  if (!x) fail(origin, fmt::format("DeepSpeed config '{}{}' has the wrong type: {}", prefix, key, v.dump()));
  return *x;
}

// "device": "cpu" | "none" (or nvme: not verified on HPU, as the seeds say).
bool offloadTo(const json& zero, const char* key, const std::string& origin) {
  if (!zero.contains(key)) return false;
  const json& o = zero[key];
  refuseUnknown(o, {"device", "pin_memory", "buffer_count", "fast_init"}, origin, std::string("zero_optimization.") + key + ".");
  const std::string dev = get<std::string>(o, "device", "none", origin);
  if (dev == "nvme") fail(origin, fmt::format("zero_optimization.{}.device=nvme is not supported (use cpu)", key));
  if (dev != "cpu" && dev != "none") fail(origin, fmt::format("zero_optimization.{}.device must be cpu or none, not {}", key, dev));
  return dev == "cpu";
}

// The DeepSpeed config: init_args.config (dict or JSON path), else
// PL_DEEPSPEED_CONFIG_PATH; `origin` names where it came from.
json loadConfig(const config::Node& args, const Environment& env, std::string& origin) {
  json cfg = json::object();
  origin = "trainer.strategy.init_args.config";
  const config::Node& c = *args.find("config");
  std::string path;
  if (c.isMap()) {
    cfg = toJson(c);
  } else if (c.isScalar()) {
    path = c.str();
  } else if (auto env_path = env.get("PL_DEEPSPEED_CONFIG_PATH"); env_path && !env_path->empty()) {
    path = *env_path;
  }
  if (!path.empty()) {
    origin = path;
    cfg = json::parse(readFile(path), nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object()) fail(path, "not a DeepSpeed JSON config (a JSON object)");
  }
  return cfg;
}

}  // namespace

int deepSpeedTensorParallelSize(const config::Node& args, const Environment& env) {
  std::string origin;
  const json cfg = loadConfig(args, env, origin);
  if (!cfg.contains("tensor_parallel")) return 1;
  const json& t = cfg["tensor_parallel"];
  if (!t.is_object()) fail(origin, "tensor_parallel must be an object ({\"tp_size\": N})");
  refuseUnknown(t, {"tp_size"}, origin, "tensor_parallel.");
  const auto size = get<std::int64_t>(t, "tp_size", 1, origin, "tensor_parallel.");
  if (size < 1) fail(origin, fmt::format("tensor_parallel.tp_size must be at least 1, not {}", size));
  return static_cast<int>(size);
}

DeepSpeedSettings resolveDeepSpeed(const config::Node& args, const Environment& env,
                                   std::int64_t dataloader_batch, std::int64_t accumulate_grad_batches, int world_size) {
  DeepSpeedSettings s;
  auto arg = [&](const char* k) -> const config::Node& { return *args.find(k); };
  s.stage = config::asBool(arg("zero_optimization")) ? static_cast<int>(config::asInt(arg("stage"))) : 0;
  s.offload_optimizer = config::asBool(arg("offload_optimizer"));
  s.offload_parameters = config::asBool(arg("offload_parameters"));
  s.cpu_checkpointing = config::asBool(arg("cpu_checkpointing"));
  s.partition_activations = config::asBool(arg("partition_activations"));

  std::string origin;
  const json cfg = loadConfig(args, env, origin);
  refuseUnknown(cfg,
                {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "bf16", "fp16",
                 "zero_optimization", "zero_allow_untested_optimizer", "scheduler", "optimizer", "gradient_clipping",
                 "steps_per_print", "wall_clock_breakdown", "activation_checkpointing", "communication_data_type",
                 "tensor_parallel"},
                origin, "");
  if (cfg.contains("zero_optimization")) {
    const json& z = cfg["zero_optimization"];
    if (!z.is_object()) fail(origin, "zero_optimization must be an object");
    refuseUnknown(z,
                  {"stage", "offload_optimizer", "offload_param", "reduce_bucket_size", "allgather_bucket_size",
                   "contiguous_gradients", "overlap_comm", "reduce_scatter", "allgather_partitions"},
                  origin, "zero_optimization.");
    s.stage = get<int>(z, "stage", s.stage, origin, "zero_optimization.");
    s.offload_optimizer = offloadTo(z, "offload_optimizer", origin) || s.offload_optimizer;
    s.offload_parameters = offloadTo(z, "offload_param", origin) || s.offload_parameters;
    s.reduce_bucket_elements = static_cast<std::int64_t>(get<double>(z, "reduce_bucket_size", 0.0, origin));
  }
  if (s.stage < 0 || s.stage > 3) fail(origin, fmt::format("zero_optimization.stage must be 0, 1, 2 or 3, not {}", s.stage));
  if (s.offload_optimizer && s.stage < 1)
    fail(origin, "offload_optimizer needs ZeRO stage 1 or higher (set zero_optimization.stage)");
  if (s.offload_parameters && s.stage != 3) fail(origin, "offload_parameters (offload_param) needs ZeRO stage 3");
  if (cfg.contains("activation_checkpointing")) {
    const json& a = cfg["activation_checkpointing"];
    refuseUnknown(a, {"partition_activations", "cpu_checkpointing", "contiguous_memory_optimization", "number_checkpoints"},
                  origin, "activation_checkpointing.");
    s.partition_activations = get<bool>(a, "partition_activations", s.partition_activations, origin);
    s.cpu_checkpointing = get<bool>(a, "cpu_checkpointing", s.cpu_checkpointing, origin);
  }
  // Lightning writes init_args.zero_allow_untested_optimizer into the config
  // it makes when none is given; a given config says it itself (DeepSpeed's
  // default: false).
  const config::Node* given = args.find("config");
  const auto env_path = env.get("PL_DEEPSPEED_CONFIG_PATH");
  const bool has_config = (given != nullptr && !given->isNull()) || (env_path && !env_path->empty());
  const config::Node* allow = args.find("zero_allow_untested_optimizer");
  s.allow_untested_optimizer = get<bool>(cfg, "zero_allow_untested_optimizer",
                                         !has_config && allow != nullptr && config::asBool(*allow), origin);
  if (cfg.contains("communication_data_type")) {
    const json& t = cfg["communication_data_type"];
    if (!t.is_string() || (t != "fp32" && t != "bf16"))
      fail(origin, fmt::format("communication_data_type {} is not supported by hpu-train (fp32, bf16)", t.dump()));
    s.communication_data_type = t.get<std::string>();
  }
  if (cfg.contains("gradient_clipping")) s.gradient_clipping = get<double>(cfg, "gradient_clipping", 0.0, origin);

  // Precision: bf16.enabled / fp16.enabled.
  for (const char* key : {"bf16", "fp16"}) {
    if (!cfg.contains(key)) continue;
    const json& p = cfg[key];
    refuseUnknown(p, {"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis", "min_loss_scale"},
                  origin, std::string(key) + ".");
    if (get<bool>(p, "enabled", false, origin, std::string(key) + ".")) {
      if (!s.precision.empty()) fail(origin, "bf16.enabled and fp16.enabled are both true; enable one");
      s.precision = std::string(key) == "bf16" ? "bf16-mixed" : "16-mixed";
    }
  }
  // DeepSpeed's fp16 loss scaler: loss_scale 0 is dynamic from
  // 2^initial_scale_power, anything else a static scale.
  if (cfg.contains("fp16")) {
    const json& p = cfg["fp16"];
    const std::string pre = "fp16.";
    LossScalerOptions& ls = s.loss_scaler;
    const double fixed = get<double>(p, "loss_scale", 0.0, origin, pre);
    const auto power = get<std::int64_t>(p, "initial_scale_power", 16, origin, pre);
    ls.growth_interval = static_cast<int>(get<std::int64_t>(p, "loss_scale_window", 1000, origin, pre));
    ls.hysteresis = static_cast<int>(get<std::int64_t>(p, "hysteresis", 2, origin, pre));
    ls.min_scale = static_cast<float>(get<double>(p, "min_loss_scale", 1.0, origin, pre));
    if (fixed < 0 || power < 0 || power > 40 || ls.growth_interval < 1 || ls.hysteresis < 1 || ls.min_scale < 0)
      fail(origin, fmt::format("DeepSpeed config fp16 loss scaling out of range: {} (expected loss_scale >= 0, "
                               "initial_scale_power 0..40, loss_scale_window >= 1, hysteresis >= 1, min_loss_scale >= 0)",
                               p.dump()));
    ls.dynamic = fixed == 0;
    ls.initial_scale = ls.dynamic ? static_cast<float>(std::ldexp(1.0, static_cast<int>(power))) : static_cast<float>(fixed);
  }

  // DeepSpeed's batch rule: train_batch_size = micro x accumulation x world.
  const std::int64_t w = world_size;
  const bool has_train = cfg.contains("train_batch_size"), has_micro = cfg.contains("train_micro_batch_size_per_gpu"),
             has_acc = cfg.contains("gradient_accumulation_steps");
  std::int64_t train = get<std::int64_t>(cfg, "train_batch_size", 0, origin);
  std::int64_t micro = has_micro ? get<std::int64_t>(cfg, "train_micro_batch_size_per_gpu", 0, origin) : dataloader_batch;
  std::int64_t acc = has_acc ? get<std::int64_t>(cfg, "gradient_accumulation_steps", 1, origin) : accumulate_grad_batches;
  if (has_train && !has_acc && has_micro) acc = train / (micro * w);
  if (has_train && has_acc && !has_micro) micro = train / w / acc;
  if (!has_train) train = micro * acc * w;
  if (micro <= 0 || acc <= 0 || train != micro * acc * w)
    fail(origin, fmt::format("Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                             "gradient_acc_step * world_size {} != {} * {} * {}",
                             train, micro, acc, w));
  if (micro != dataloader_batch)
    fail(origin, fmt::format("train_micro_batch_size_per_gpu is {} but the data loader's batch size "
                             "(data.init_args.batch_size) is {}; make them equal",
                             micro, dataloader_batch));
  s.train_batch_size = train;
  s.micro_batch_size = micro;
  s.gradient_accumulation_steps = acc;

  if (cfg.contains("scheduler")) {
    const json& sch = cfg["scheduler"];
    refuseUnknown(sch, {"type", "params"}, origin, "scheduler.");
    const std::string type = get<std::string>(sch, "type", "", origin, "scheduler.");
    if (type != "WarmupDecayLR") fail(origin, fmt::format("scheduler.type {} is not supported (WarmupDecayLR)", type));
    const json params = sch.value("params", json::object());
    refuseUnknown(params, {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "total_num_steps", "warmup_type", "last_batch_iteration"},
                  origin, "scheduler.params.");
    optim::WarmupDecayOptions o;
    o.warmup_min_lr = get<double>(params, "warmup_min_lr", 0.0, origin);
    o.warmup_max_lr = get<double>(params, "warmup_max_lr", 0.001, origin);
    o.warmup_num_steps = get<std::int64_t>(params, "warmup_num_steps", 1000, origin);
    if (!params.contains("total_num_steps")) fail(origin, "scheduler.params.total_num_steps is required for WarmupDecayLR");
    o.total_num_steps = get<std::int64_t>(params, "total_num_steps", 0, origin);
    const std::string wt = get<std::string>(params, "warmup_type", "log", origin);
    if (wt != "log" && wt != "linear") fail(origin, "scheduler.params.warmup_type must be log or linear, not " + wt);
    o.log_warmup = wt == "log";
    s.scheduler = o;
  }
  if (cfg.contains("optimizer")) {
    const json& opt = cfg["optimizer"];
    refuseUnknown(opt, {"type", "params"}, origin, "optimizer.");
    s.optimizer_type = get<std::string>(opt, "type", "", origin, "optimizer.");
    if (s.optimizer_type != "Adam" && s.optimizer_type != "AdamW" && s.optimizer_type != "SGD")
      fail(origin, fmt::format("optimizer.type {} is not supported (Adam, AdamW, SGD)", s.optimizer_type));
    const json params = opt.value("params", json::object());
    for (const auto& [k, v] : params.items()) {
      if (k == "betas" && v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number()) {
        s.optimizer_params["beta1"] = v[0].get<double>();
        s.optimizer_params["beta2"] = v[1].get<double>();
      } else if (v.is_number()) {
        s.optimizer_params[k] = v.get<double>();
      } else {
        fail(origin, fmt::format("optimizer.params.{} is not a number", k));
      }
    }
  }
  return s;
}

}  // namespace hpu::core
