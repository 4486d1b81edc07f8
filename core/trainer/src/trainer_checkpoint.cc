// Trainer checkpoints: what a checkpoint holds and how a run resumes from it.
//
// Tensors: "model.<name>" for parameters and buffers (their dtype),
// "optimizer.<state>.<slice>" for optimizer state. Metadata:
//   hpu_train.format = "1", epoch, global_step, batches_done (of `epoch`),
//   optimizer (name, lr, step; groups past the first: lr, step, params; frozen
//   params), scheduler (JSON state), precision (JSON),
//   callbacks (JSON object keyed by stateKey()), config (the resolved YAML).
// Dropout masks need no state: they derive from (seed, rank, epoch, batch).
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "hpu/core/base/errors.h"
#include "hpu/core/checkpoint/consolidate.h"
#include "hpu/core/checkpoint/run_checkpoints.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/tensor/leaf.h"
#include "hpu/core/trainer/trainer.h"
#include "hpu/device/numerics.h"
#include "metric_collector.h"

namespace hpu::core {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

checkpoint::TensorEntry entryOf(const std::string& name, const Tensor& t) {
  checkpoint::TensorEntry e;
  e.name = name;
  e.dtype = t.dtype() == DType::kInt64 ? DType::kInt64 : t.dtype();
  e.shape.assign(t.shape().dims().begin(), t.shape().dims().end());
  if (t.dtype() == DType::kInt64)
    e.ints.assign(t.labels(), t.labels() + t.numel());
  else
    e.values = t.toHost();
  return e;
}

// Copies a stored tensor into `t` (this rank's piece `shard` of the stored
// whole), checking shape.
void loadInto(const checkpoint::Checkpoint& ckpt, const std::string& name, Tensor t, const Shard& shard,
              const std::string& path) {
  const checkpoint::TensorEntry* e = ckpt.find(name);
  if (e == nullptr) throw CheckpointError(fmt::format("{} has no tensor '{}': was it saved from this model?", path, name));
  const Shape stored(std::span<const std::int64_t>(e->shape));
  if (!(stored == shard.fullShape(t.shape())))
    throw CheckpointError(fmt::format("{}: '{}' has shape {} in the checkpoint but {} in the model", path, name,
                                      stored.str(), shard.fullShape(t.shape()).str()));
  if (t.dtype() == DType::kInt64)
    std::copy(e->ints.begin(), e->ints.end(), t.labels());
  else
    shard.take(t.shape(), e->values, t.values());
  // Half-precision parameters hold their dtype's values (fp8 weights keep
  // theirs: they are quantized with their scale where they are used).
  if (t.dtype() == DType::kBFloat16 || t.dtype() == DType::kFloat16)
    device::roundInPlace({t.data(), static_cast<std::size_t>(t.numel())}, t.dtype());
}

// `key` of a callback's JSON state if it is a string there, else "".
std::string stateString(const Callback& callback, const char* key) {
  const std::string state = callback.stateJson();
  const json j = json::parse(state.empty() ? "{}" : state, nullptr, false);
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// The rows a padded vocabulary holds past its tokens (Shard::padding of the
// embedding and the output head, which share one vocabulary; 0 unpadded),
// the model's: under pipeline stages a rank may hold neither, so the ranks
// take the largest. Collective: every rank calls it.
std::int64_t vocabularyPadding(const nn::Module& model, Strategy& strategy) {
  std::int64_t mine = 0;
  for (const auto& p : model.namedParameters()) mine = std::max(mine, p.shard.padding);
  std::vector<double> rows{static_cast<double>(mine)};
  strategy.allReduceMax(rows);
  return static_cast<std::int64_t>(rows.front());
}

}  // namespace

// Optimizer state comes whole (in the main file; a sharding strategy takes
// its shard of it) or sharded (one file per rank, for the same world size).
// Whole state is read as each state buffer's slices concatenated in slice
// order: buckets hold the parameters in one order whatever their sizes, so
// state saved with one bucketing (reduce_bucket_size, strategy) resumes
// with another.
void Trainer::restoreOptimizerState(const checkpoint::Checkpoint& ckpt, const std::string& path, bool pieces) {
  const auto shards = strategy_->optimizerShards(*params_);
  const auto buffers = optimizer_->stateBuffers();
  const std::size_t per_slice = shards.empty() ? 0 : buffers.size() / shards.size();
  auto mismatch = [&](const std::string& name) {
    return CheckpointError(fmt::format("{}: optimizer state '{}' is missing or has another size; the checkpoint comes "
                                       "from a different model, optimizer or strategy",
                                       path, name));
  };
  // This rank's own state, buffer by buffer: its shard, or the whole slice
  // it takes its shard of (a strategy that saves its shards whole).
  const auto copyOwn = [&](const checkpoint::Checkpoint& own) {
    for (std::size_t k = 0; k < buffers.size(); ++k) {
      const auto& s = buffers[k];
      const checkpoint::TensorEntry* e = own.find("optimizer." + s.name);
      if (e == nullptr) throw mismatch(s.name);
      const Strategy::SliceShard& shard = shards[k / per_slice];
      if (e->values.size() == s.values.size())
        std::copy(e->values.begin(), e->values.end(), s.values.begin());
      else if (static_cast<std::int64_t>(e->values.size()) == shard.total)
        std::copy_n(e->values.begin() + shard.offset, shard.size, s.values.begin());
      else
        throw mismatch(s.name);
    }
  };
  if (pieces) return copyOwn(ckpt);
  if (auto it = ckpt.metadata.find("sharded_optimizer"); it != ckpt.metadata.end()) {
    const bool sharded_now = std::any_of(shards.begin(), shards.end(), [](const auto& s) { return s.size != s.total; });
    if (!sharded_now || std::stoi(it->second) != strategy_->worldSize())
      throw CheckpointError(fmt::format("{}: its optimizer state is sharded over {} ranks; resume it with the same ZeRO "
                                        "world size, or consolidate it first: hpu-train consolidate {} <output.ckpt>",
                                        path, it->second, path));
    // The same world size may still shard otherwise (another stage's
    // buckets, HYBRID_SHARD's groups): this rank's slices must be the saved ones.
    const checkpoint::Checkpoint own = checkpoint_io_->load(checkpoint::shardPath(path, strategy_->globalRank()));
    json now = json::array();
    for (const auto& sh : shards) now.push_back({sh.offset, sh.size, sh.total});
    if (json::parse(own.meta("hpu_train.optimizer_shard")).at("slices") != now)
      throw CheckpointError(fmt::format("{}: its optimizer state is sharded otherwise than this run shards it (another "
                                        "ZeRO stage, bucket size or shard groups); resume it with the strategy that "
                                        "saved it, or consolidate it first: hpu-train consolidate {} <output.ckpt>",
                                        path, path));
    return copyOwn(own);
  }
  std::map<std::string, std::map<std::size_t, const checkpoint::TensorEntry*>> stored;  // state -> slice -> tensor
  for (const auto& e : ckpt.tensors)
    if (auto key = checkpoint::parseOptimizerStateName(e.name)) stored[key->state][key->slice] = &e;
  std::map<std::string, std::vector<float>> flat;
  for (const auto& [state, slices] : stored)
    for (const auto& [slice, e] : slices) flat[state].insert(flat[state].end(), e->values.begin(), e->values.end());
  // Whole state: every parameter's whole values, one after the other in the
  // checkpoint's order (kOptimizerParams; older checkpoints: this model's
  // bucket members'); this rank takes the part of each that it holds (its
  // tensor-parallel piece, within its ZeRO shard of the bucket).
  std::map<std::string, std::int64_t> whole_offset;
  std::int64_t numel = 0;
  if (auto it = ckpt.metadata.find(checkpoint::kOptimizerParams); it != ckpt.metadata.end()) {
    for (const json& n : json::parse(it->second)) {
      const std::string name = n.get<std::string>();
      const checkpoint::TensorEntry* e = ckpt.find(name);
      if (e == nullptr)
        throw CheckpointError(fmt::format("{}: its optimizer state covers parameter '{}', which it holds no tensor of",
                                          path, name));
      whole_offset[name] = numel;
      numel += Shape(std::span<const std::int64_t>(e->shape)).numel();
    }
  } else {
    for (const auto& b : params_->buckets())
      for (const auto& m : b.members) {
        whole_offset[model_->checkpointKey(m.name)] = numel;
        numel += m.shard.fullShape(m.tensor.shape()).numel();
      }
  }
  for (std::size_t slice = 0; slice < shards.size(); ++slice) {
    const nn::ParamBucket& bucket = params_->buckets()[slice];
    for (std::size_t k = 0; k < per_slice; ++k) {
      const auto& s = buffers[slice * per_slice + k];
      const auto it = flat.find(checkpoint::parseOptimizerStateName("optimizer." + s.name)->state);
      if (it == flat.end() || static_cast<std::int64_t>(it->second.size()) != numel) throw mismatch(s.name);
      const std::int64_t lo = shards[slice].offset, hi = lo + shards[slice].size;
      for (std::size_t j = 0; j < bucket.members.size(); ++j) {
        const nn::NamedTensor& m = bucket.members[j];
        const auto at = whole_offset.find(model_->checkpointKey(m.name));
        if (at == whole_offset.end())
          throw CheckpointError(fmt::format("{}: its optimizer state has nothing for parameter '{}'; the checkpoint "
                                            "comes from a different model",
                                            path, model_->checkpointKey(m.name)));
        const std::int64_t whole = at->second;
        m.shard.forEachRun(m.tensor.shape(), [&](std::int64_t full, std::int64_t local, std::int64_t count) {
          const std::int64_t from = std::max(lo, bucket.offsets[j] + local);
          const std::int64_t to = std::min(hi, bucket.offsets[j] + local + count);
          if (from < to)
            std::copy_n(it->second.begin() + whole + full + (from - bucket.offsets[j] - local), to - from,
                        s.values.begin() + (from - lo));
        });
      }
    }
  }
}

// Every state's slices (this rank's pieces of its bucket members) replaced by
// one slice holding each member's whole values in turn, as one device saves
// them. Every tensor-parallel rank calls it, with the same states.
std::vector<checkpoint::TensorEntry> Trainer::wholeOptimizerState(std::vector<checkpoint::TensorEntry> tensors) {
  std::map<std::string, std::map<std::size_t, const checkpoint::TensorEntry*>> states;  // state -> slice -> tensor
  for (const auto& e : tensors)
    if (auto key = checkpoint::parseOptimizerStateName(e.name)) states[key->state][key->slice] = &e;
  std::vector<checkpoint::TensorEntry> out;
  for (const auto& [state, slices] : states) {
    checkpoint::TensorEntry whole;
    whole.name = "optimizer." + state + ".0";
    for (const auto& [slice, e] : slices) {
      const nn::ParamBucket& b = params_->buckets().at(slice);
      for (std::size_t j = 0; j < b.members.size(); ++j) {
        const nn::NamedTensor& m = b.members[j];
        const std::vector<float> values = strategy_->wholeOf(
            std::span<const float>(e->values).subspan(static_cast<std::size_t>(b.offsets[j]),
                                                      static_cast<std::size_t>(m.tensor.numel())),
            m.shard, m.tensor.shape());
        whole.values.insert(whole.values.end(), values.begin(), values.end());
      }
    }
    whole.shape = {static_cast<std::int64_t>(whole.values.size())};
    out.push_back(std::move(whole));
  }
  for (auto& e : tensors)
    if (!checkpoint::parseOptimizerStateName(e.name)) out.push_back(std::move(e));
  return out;
}

// The optimizer's groups as saved: frozen parameters, then each group past
// the first with its parameters, lr and step count.
void Trainer::restoreParamGroups(const nlohmann::json& opt, const std::string& path) {
  std::map<std::string, Tensor> by_name;
  std::set<std::string> built_frozen;  // frozen as the model was built (a LoRA model's base weights)
  for (const auto& p : model_->namedParameters()) {
    if (params_->bucketed(p.tensor))
      by_name.emplace(model_->checkpointKey(p.name), p.tensor);
    else
      built_frozen.insert(model_->checkpointKey(p.name));
  }
  const auto named = [&](const json& names) {
    std::vector<Tensor> out;
    for (const auto& n : names) {
      const auto it = by_name.find(n.get<std::string>());
      if (it == by_name.end() && built_frozen.count(n.get<std::string>())) continue;  // saved by earlier versions
      if (it == by_name.end())
        throw CheckpointError(fmt::format("{}: the optimizer's parameter groups name '{}', which this model lacks", path,
                                          n.get<std::string>()));
      out.push_back(it->second);
    }
    return out;
  };
  optimizer_->removeAddedGroups();
  for (const auto& [name, t] : by_name) {
    Tensor(t).setRequiresGrad(true);
    param_group_[Leaf(t).id()] = 0;
  }
  freezeParameters(named(opt.value("frozen", json::array())));
  for (const auto& g : opt.value("groups", json::array())) {
    std::vector<Tensor> params = named(g["params"]);
    for (const Tensor& t : params) param_group_.erase(Leaf(t).id());
    const std::size_t group = addParamGroup(params, g["lr"].get<double>());
    optimizer_->setGroupStepCount(group, g["step"].get<std::int64_t>());
  }
}

Trainer::CheckpointLayout Trainer::checkpointLayout(bool weights_only) const {
  // A tensor-parallel run saves every rank's pieces in its own file
  // (distributed), or each parameter made whole in the main file; a
  // pipeline- or expert-parallel one, whose ranks hold different
  // parameters, always writes every rank's file, then assembles the whole
  // tensors from them unless it keeps the files.
  CheckpointLayout l;
  l.split = strategy_->tensorParallelGroup() != nullptr;
  // Expert-parallel ranks hold other experts each: like stages, every rank writes.
  const bool experts = strategy_->expertParallelGroup() != nullptr;
  l.distributed = (l.split && strategy_->savesDistributedCheckpoint()) || strategy_->pipelineStages() > 1 || experts;
  l.assemble = l.distributed && !strategy_->savesDistributedCheckpoint();
  // Optimizer state sharded over ranks stays in each rank's file unless the
  // strategy gathers it whole.
  const auto shards = strategy_->optimizerShards(*params_);
  l.partial_optimizer_state = !weights_only && optimizer_ &&
                              std::any_of(shards.begin(), shards.end(), [](const auto& s) { return s.size != s.total; });
  l.sharded = l.partial_optimizer_state && !strategy_->gathersOptimizerSlices();
  return l;
}

std::vector<std::string> Trainer::checkpointFiles(const std::string& path, bool weights_only) const {
  const CheckpointLayout l = checkpointLayout(weights_only);
  std::vector<std::string> files;
  if (isGlobalZero()) files.push_back(path);
  if ((l.sharded || l.distributed) && !l.assemble) files.push_back(checkpoint::shardPath(path, strategy_->globalRank()));
  return files;
}

void Trainer::saveCheckpoint(const std::string& path, bool weights_only) {
  GatheredParameters gathered(*strategy_, *params_, Strategy::GatherScope::kAll);
  const CheckpointLayout layout = checkpointLayout(weights_only);
  const bool split = layout.split;
  const int stages = strategy_->pipelineStages();
  const bool distributed = layout.distributed;
  const bool assemble = layout.assemble;
  checkpoint::Checkpoint ckpt;
  checkpoint::Checkpoint own;  // this rank's file: its pieces, or its ZeRO shard of the optimizer state
  json pieces = json::object();
  for (const auto& p : model_->namedParameters()) {
    const std::string key = model_->checkpointKey(p.name);
    checkpoint::TensorEntry e = entryOf(key, p.tensor);
    if (distributed && p.shard.split())
      pieces[key] = {p.shard.dim, p.shard.parts, p.shard.index, p.shard.blocks, p.shard.padding};
    if (!distributed && p.shard.split()) {
      e.values = strategy_->wholeOf(e.values, p.shard, p.tensor.shape());
      const Shape whole = p.shard.fullShape(p.tensor.shape());
      e.shape.assign(whole.dims().begin(), whole.dims().end());
    }
    (distributed ? own : ckpt).tensors.push_back(std::move(e));
  }
  for (const auto& b : model_->namedBuffers())
    (distributed ? own : ckpt).tensors.push_back(entryOf(model_->checkpointKey(b.name), b.tensor));
  auto& m = ckpt.metadata;
  m["hpu_train.format"] = "1";
  m["epoch"] = std::to_string(current_epoch_);
  m["global_step"] = std::to_string(global_step_);
  m["batches_done"] = std::to_string(epoch_completed_ ? -1 : batch_in_epoch_);
  m["precision"] = precision_->precision();
  m["config"] = config::emitYaml(config_);
  const auto shards = strategy_->optimizerShards(*params_);
  const bool sharded = layout.sharded;
  if (!weights_only && optimizer_) {
    const auto buffers = optimizer_->stateBuffers();
    const std::size_t per_slice = shards.empty() ? 0 : buffers.size() / shards.size();
    for (std::size_t k = 0; k < buffers.size(); ++k) {
      const auto& s = buffers[k];
      checkpoint::TensorEntry e;
      e.name = "optimizer." + s.name;
      auto whole = layout.partial_optimizer_state ? strategy_->wholeOptimizerSlice(s.values, shards[k / per_slice])
                                                  : std::nullopt;
      if (whole) {
        e.values = std::move(*whole);
      } else {
        e.values.assign(s.values.begin(), s.values.end());
      }
      e.shape = {static_cast<std::int64_t>(e.values.size())};
      (sharded || distributed ? own : ckpt).tensors.push_back(std::move(e));
    }
    if (split && !distributed) ckpt.tensors = wholeOptimizerState(std::move(ckpt.tensors));
    if (sharded) {
      json layout = json::array();
      for (const auto& s : shards) layout.push_back({s.offset, s.size, s.total});
      own.metadata["hpu_train.optimizer_shard"] =
          json{{"rank", strategy_->globalRank()}, {"world_size", strategy_->worldSize()}, {"slices", layout}}.dump();
      m["sharded_optimizer"] = std::to_string(strategy_->worldSize());
    }
    json opt{{"name", optimizer_->name()}, {"lr", optimizer_->lr()}, {"step", optimizer_->stepCount()}};
    // Parameter groups past the first, and frozen parameters, by name.
    json groups = json::array(), frozen = json::array();
    for (std::size_t g = 1; g < optimizer_->numGroups(); ++g)
      groups.push_back({{"lr", optimizer_->groupLr(g)}, {"step", optimizer_->groupStepCount(g)}, {"params", json::array()}});
    for (const auto& p : model_->namedParameters()) {
      const auto group = paramGroupOf(p.tensor);
      if (!group) {
        if (params_->bucketed(p.tensor)) frozen.push_back(model_->checkpointKey(p.name));  // frozen in training, not as built
      } else if (*group > 0) {
        groups[*group - 1]["params"].push_back(model_->checkpointKey(p.name));
      }
    }
    if (!groups.empty()) opt["groups"] = groups;
    if (!frozen.empty()) opt["frozen"] = frozen;
    m["optimizer"] = opt.dump();
    if (scheduler_) m["scheduler"] = json{{"name", scheduler_->name()}, {"state", scheduler_->state()}}.dump();
    m["precision_state"] = precision_->stateJson();
    json cbs = json::object();
    for (const auto& c : callbacks_)
      if (auto st = c->stateJson(); !st.empty()) cbs[c->stateKey()] = st;
    m["callbacks"] = cbs.dump();
  }
  json order = json::array();  // the parameters of the optimizer state, in its order
  for (const auto& b : params_->buckets())
    for (const auto& member : b.members) order.push_back(model_->checkpointKey(member.name));
  if (distributed) {
    const int ranks = split ? strategy_->tensorParallelGroup()->size() : 1;
    own.metadata[checkpoint::kTensorParallelPart] = json{{"rank", strategy_->globalRank()},
                                                         {"tensor_parallel_size", ranks},
                                                         {"pipeline_stage", strategy_->pipelineStage()},
                                                         {"shards", pieces},
                                                         {"optimizer_params", order}}
                                                        .dump();
    json layout{{"world_size", strategy_->worldSize()},
                {"tensor_parallel_size", ranks},
                {"strategy", strategy_->name()},
                {"vocabulary_padding", vocabularyPadding(*model_, *strategy_)}};
    if (const ops::ParallelGroup* ep = strategy_->expertParallelGroup()) layout["expert_parallel_size"] = ep->size();
    if (stages > 1) layout["pipeline_parallel_size"] = stages;
    if (modelChunks() > 1) layout["virtual_pipeline_size"] = modelChunks();
    m[checkpoint::kDistributedCheckpoint] = layout.dump();
  } else {
    m[checkpoint::kOptimizerParams] = order.dump();
  }
  if (sharded || distributed) checkpoint_io_->save(own, checkpoint::shardPath(path, strategy_->globalRank()));
  if (isGlobalZero()) checkpoint_io_->save(ckpt, path);
  if (assemble) {
    strategy_->barrier("save_checkpoint_parts");
    if (isGlobalZero())
      checkpoint_io_->save(checkpoint::assembleDistributed(*checkpoint_io_, path, ckpt), path);
    strategy_->barrier("save_checkpoint_assembled");
    checkpoint_io_->remove(checkpoint::shardPath(path, strategy_->globalRank()));
  }
  // The logs reach as far as the checkpoint: a run resumed from it after a
  // crash continues them without a gap.
  if (isGlobalZero())
    for (auto& l : loggers_) {
      l->afterSaveCheckpoint(path);
      l->save();
    }
  strategy_->barrier("save_checkpoint");
}

void Trainer::removeCheckpoint(const std::string& path) {
  if (isGlobalZero()) checkpoint_io_->remove(path);
  checkpoint_io_->remove(checkpoint::shardPath(path, strategy_->globalRank()));
}

std::string Trainer::resolveCheckpointPath(const std::string& ckpt_path) const {
  if (!checkpoint::isRunCheckpointWord(ckpt_path)) return ckpt_path;
  // As Lightning looks: a ModelCheckpoint's own dirpath, this run's
  // checkpoint directory; then the logger's earlier runs.
  checkpoint::RunCheckpointSearch search;
  search.dirs = checkpointDirs();
  for (const auto& c : callbacks_)
    if (search.best_known.empty()) search.best_known = stateString(*c, "best_model_path");
  search.runs_root = fs::path(logDir()).parent_path().string();
  using checkpoint::RunCheckpoint;
  const RunCheckpoint found = checkpoint::findRunCheckpoint(ckpt_path, search);
  if (found.outcome == RunCheckpoint::Outcome::kFound) {
    if (isGlobalZero()) spdlog::info("ckpt_path={}: {} ({})", ckpt_path, found.path, found.how);
    return found.path;
  }
  if (ckpt_path == "best")
    throw UsageError(
        found.outcome == RunCheckpoint::Outcome::kNoRecordedBest
            ? fmt::format("ckpt_path=best: no ModelCheckpoint of this process knows a best checkpoint, and the state "
                          "of {} records none (ModelCheckpoint records one with monitor set); pass a checkpoint path",
                          found.looked_in)
            : fmt::format("ckpt_path=best: no best checkpoint is known and no last.ckpt under {}; pass a checkpoint "
                          "path instead",
                          found.looked_in));
  // As Lightning: "last" without one loads nothing (a job that is always
  // started with --ckpt_path last begins from scratch the first time).
  spdlog::warn("ckpt_path=last: no last.ckpt under {}, so no checkpoint is loaded (ModelCheckpoint writes one with "
               "save_last: true)",
               found.looked_in);
  return "";
}

std::string Trainer::checkpointAfterRestart(const std::string& ckpt_path) {
  const std::string newest = strategy_->broadcast(isGlobalZero() ? newestCompleteCheckpoint() : "", 0);
  if (!newest.empty()) {
    if (isGlobalZero()) spdlog::info("restart {}: resuming from the newest complete checkpoint, {}", restart_round_, newest);
    return newest;
  }
  if (isGlobalZero())
    spdlog::info("restart {}: no checkpoint of this run yet; starting {}", restart_round_,
                 ckpt_path.empty() ? "from scratch" : "from ckpt_path " + ckpt_path);
  return ckpt_path.empty() ? "" : resolveCheckpointPath(ckpt_path);
}

std::vector<std::string> Trainer::checkpointDirs() const {
  std::vector<std::string> dirs;
  for (const auto& c : callbacks_)
    if (std::string dir = stateString(*c, "dirpath"); !dir.empty()) dirs.push_back(std::move(dir));
  dirs.push_back((fs::path(logDir()) / "checkpoints").string());
  return dirs;
}

std::string Trainer::newestCompleteCheckpoint() const {
  // Progress: optimizer steps, then whether the epoch was finished (its
  // end-of-epoch hooks ran), then the file's age.
  using Progress = std::tuple<std::int64_t, std::int64_t, fs::file_time_type>;
  std::optional<Progress> best;
  std::string newest;
  for (const std::string& dir : checkpointDirs()) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_regular_file() || entry.path().extension() != ".ckpt" || name.rfind(".tmp-", 0) == 0) continue;
      std::map<std::string, std::string> meta;
      try {
        meta = checkpoint::readMetadata(entry.path().string());
      } catch (const CheckpointError& e) {
        spdlog::warn("restart {}: skipping {}: {}", restart_round_, entry.path().string(), e.what());
        continue;
      }
      if (!meta.count("global_step") || !meta.count("optimizer")) continue;  // weights only: cannot resume
      // Every rank's file of a checkpoint written by each rank.
      int rank_files = 0;
      if (auto it = meta.find("sharded_optimizer"); it != meta.end()) rank_files = std::stoi(it->second);
      if (auto it = meta.find(checkpoint::kDistributedCheckpoint); it != meta.end())
        rank_files = json::parse(it->second).at("world_size").get<int>();
      bool whole = true;
      for (int r = 0; r < rank_files; ++r) whole = whole && fs::exists(checkpoint::shardPath(entry.path().string(), r));
      if (!whole) continue;
      const std::int64_t done = meta.count("batches_done") ? std::stoll(meta.at("batches_done")) : 0;
      const Progress progress{std::stoll(meta.at("global_step")), std::stoll(meta.at("epoch")) * 2 + (done < 0 ? 1 : 0),
                              entry.last_write_time(ec)};
      if (!best || progress > *best) {
        best = progress;
        newest = entry.path().string();
      }
    }
  }
  return newest;
}

void Trainer::restore(const std::string& path, bool full) {
  checkpoint::Checkpoint ckpt = checkpoint_io_->load(path);
  // A distributed checkpoint: this rank's own file when the run has the same
  // strategy (its buckets) and layout, else the whole tensors assembled from
  // the files (checkpoints that do not name their strategy are
  // ModelParallelStrategy's).
  bool pieces = false;
  if (auto it = ckpt.metadata.find(checkpoint::kDistributedCheckpoint); it != ckpt.metadata.end()) {
    const json layout = json::parse(it->second);
    const ops::ParallelGroup* tp = strategy_->tensorParallelGroup();
    const ops::ParallelGroup* ep = strategy_->expertParallelGroup();
    pieces = (tp != nullptr || ep != nullptr) &&
             layout.value("strategy", std::string("ModelParallelStrategy")) == strategy_->name() &&
             layout.at("world_size").get<int>() == strategy_->worldSize() &&
             layout.at("tensor_parallel_size").get<int>() == (tp ? tp->size() : 1) &&
             layout.value("pipeline_parallel_size", 1) == strategy_->pipelineStages() &&
             layout.value("virtual_pipeline_size", 1) == modelChunks() &&
             layout.value("expert_parallel_size", 1) == (ep ? ep->size() : 1);
    // This rank's file holds its pieces as it holds them, unless the
    // vocabulary was padded otherwise (another make_vocab_size_divisible_by):
    // then the whole. The layout records the padding; in a checkpoint saved
    // before it did, this rank's file's shapes tell.
    const std::string own_path = checkpoint::shardPath(path, strategy_->globalRank());
    if (auto padding = layout.find("vocabulary_padding"); pieces && padding != layout.end()) {
      pieces = padding->get<std::int64_t>() == vocabularyPadding(*model_, *strategy_);
      if (pieces) ckpt.tensors = checkpoint_io_->load(own_path).tensors;
    } else if (pieces) {
      checkpoint::Checkpoint own = checkpoint_io_->load(own_path);
      const std::vector<nn::NamedTensor> params = model_->namedParameters();
      pieces = std::all_of(params.begin(), params.end(), [&](const nn::NamedTensor& p) {
        const checkpoint::TensorEntry* e = own.find(model_->checkpointKey(p.name));
        return e == nullptr || Shape(std::span<const std::int64_t>(e->shape)) == p.tensor.shape();
      });
      if (pieces) ckpt.tensors = std::move(own.tensors);
    }
    if (!pieces) ckpt = checkpoint::assembleDistributed(*checkpoint_io_, path, ckpt);
  }
  strategy_->gatherParameters(*params_, Strategy::GatherScope::kAll);
  for (const auto& p : model_->namedParameters())
    loadInto(ckpt, model_->checkpointKey(p.name), p.tensor, pieces ? Shard{} : p.shard, path);
  for (const auto& b : model_->namedBuffers()) {
    const std::string key = model_->checkpointKey(b.name);
    if (!b.optional || ckpt.find(key) != nullptr) loadInto(ckpt, key, b.tensor, {}, path);
  }
  strategy_->parametersLoaded(*params_);
  strategy_->releaseParameters(*params_, Strategy::GatherScope::kAll);
  if (optimizer_) optimizer_->parametersLoaded();
  if (!full) return;  // evaluation: the loops start at epoch 0, step 0, as in Lightning
  global_step_ = std::stoll(ckpt.meta("global_step"));
  current_epoch_ = std::stoll(ckpt.meta("epoch"));
  if (!ckpt.metadata.count("optimizer"))
    throw CheckpointError(path + " holds weights only (save_weights_only); it cannot resume training");
  const json opt = json::parse(ckpt.meta("optimizer"));
  if (opt["name"].get<std::string>() != optimizer_->name())
    throw CheckpointError(fmt::format("{} was trained with {}, this run uses {}", path,
                                      opt["name"].get<std::string>(), optimizer_->name()));
  restoreOptimizerState(ckpt, path, pieces);
  optimizer_->setLr(opt["lr"].get<double>());
  optimizer_->setStepCount(opt["step"].get<std::int64_t>());
  restoreParamGroups(opt, path);
  if (scheduler_ && ckpt.metadata.count("scheduler"))
    scheduler_->loadState(json::parse(ckpt.meta("scheduler"))["state"].get<std::vector<double>>());
  precision_->loadStateJson(ckpt.metadata.count("precision_state") ? ckpt.meta("precision_state") : "");
  const json cbs = json::parse(ckpt.meta("callbacks"));
  for (auto& c : callbacks_)
    if (cbs.contains(c->stateKey())) c->loadStateJson(cbs[c->stateKey()].get<std::string>());
  const std::int64_t done = std::stoll(ckpt.meta("batches_done"));
  if (done < 0) {
    ++current_epoch_;  // saved at the end of its epoch
    skip_batches_ = 0;
  } else {
    skip_batches_ = done;
  }
}

}  // namespace hpu::core
