#include "hpu/core/checkpoint/consolidate.h"

#include <spdlog/fmt/fmt.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <set>
#include <span>

#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu/core/checkpoint/checkpoint_io.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/tensor/shard.h"

namespace hpu::core::checkpoint {

namespace {

using nlohmann::json;

Shape shapeOf(const TensorEntry& e) { return Shape(std::span<const std::int64_t>(e.shape)); }

// One rank's file of a distributed checkpoint: its pieces and their splits.
struct RankPart {
  std::string path;
  Checkpoint file;
  json layout;

  Shard shardOf(const std::string& name) const {
    const json& shards = layout.at("shards");
    if (!shards.contains(name)) return {};
    const json& s = shards.at(name);
    return {.dim = s.at(0).get<int>(), .parts = s.at(1).get<int>(), .index = s.at(2).get<int>(), .blocks = s.at(3).get<int>()};
  }
  const TensorEntry& tensor(const std::string& name) const {
    const TensorEntry* e = file.find(name);
    if (e == nullptr) throw CheckpointError(fmt::format("{} has no tensor '{}'", path, name));
    return *e;
  }
};

// The whole values of `name` from every rank's piece.
std::vector<float> wholeOf(const std::vector<RankPart>& parts, const std::string& name,
                           const std::function<std::span<const float>(const RankPart&)>& piece, const Shape& local) {
  const Shard first = parts.front().shardOf(name);
  if (!first.split()) {
    const auto values = piece(parts.front());
    return {values.begin(), values.end()};
  }
  std::vector<float> whole(static_cast<std::size_t>(first.fullShape(local).numel()));
  for (const RankPart& part : parts) part.shardOf(name).place(local, piece(part), whole);
  return whole;
}

}  // namespace

Checkpoint assembleDistributed(CheckpointIO& io, const std::string& path, const Checkpoint& main) {
  const json meta = json::parse(main.meta(kDistributedCheckpoint));
  const int tp = meta.at("tensor_parallel_size").get<int>();
  const int pp = meta.value("pipeline_parallel_size", 1);
  // Its ranks hold other experts each: a run of its own layout reads each rank's file.
  if (const int ep = meta.value("expert_parallel_size", 1); ep > 1)
    throw CheckpointError(fmt::format("{} was written by an expert-parallel run (expert_parallel_size {}, {} ranks): it "
                                      "resumes in that layout only (ModelParallelStrategy with expert_parallel_size {} "
                                      "on {} ranks)",
                                      path, ep, meta.at("world_size").get<int>(), ep, meta.at("world_size").get<int>()));
  // The files of the first data-parallel replica: stage s's tensor-parallel
  // rank k is rank s * tp + k.
  std::vector<std::vector<RankPart>> stages(static_cast<std::size_t>(pp));
  for (int stage = 0; stage < pp; ++stage)
    for (int k = 0; k < tp; ++k) {
      const int rank = stage * tp + k;
      RankPart part{shardPath(path, rank), io.load(shardPath(path, rank)), {}};
      part.layout = json::parse(part.file.meta(kTensorParallelPart));
      if (part.layout.at("rank").get<int>() != rank || part.layout.at("tensor_parallel_size").get<int>() != tp ||
          part.layout.value("pipeline_stage", 0) != stage)
        throw CheckpointError(fmt::format("{} is not tensor-parallel rank {} of {} of pipeline stage {} of {}'s {} x {} "
                                          "ranks",
                                          part.path, k, tp, stage, path, pp, tp));
      stages[static_cast<std::size_t>(stage)].push_back(std::move(part));
    }
  Checkpoint out;
  out.metadata = main.metadata;
  out.metadata.erase(kDistributedCheckpoint);
  // The model: each parameter from the first stage that holds it (the last
  // stage's copy of a tied embedding is the first's), its pieces placed in
  // the whole.
  std::set<std::string> seen, states;
  for (const auto& parts : stages)
    for (const TensorEntry& e : parts.front().file.tensors) {
      if (const auto key = parseOptimizerStateName(e.name)) {
        states.insert(key->state);
        continue;
      }
      if (!seen.insert(e.name).second) continue;
      TensorEntry whole = e;
      if (const Shard s = parts.front().shardOf(e.name); s.split()) {
        const Shape local = shapeOf(e);
        whole.values = wholeOf(parts, e.name, [&](const RankPart& p) { return std::span<const float>(p.tensor(e.name).values); },
                               local);
        const Shape full = s.fullShape(local);
        whole.shape.assign(full.dims().begin(), full.dims().end());
      }
      out.tensors.push_back(std::move(whole));
    }
  // The optimizer state: each rank's slices in slice order, cut into its
  // parameters' pieces, each parameter made whole (from the first stage that
  // holds it), in the order one device's buckets hold them: a stage's
  // buckets hold its parameters last to first, so the stages go last to
  // first too.
  std::map<std::string, std::size_t> owner;  // parameter -> the first stage that holds it
  for (std::size_t stage = stages.size(); stage-- > 0;)
    for (const json& param : stages[stage].front().layout.at("optimizer_params")) owner[param.get<std::string>()] = stage;
  json order = json::array();
  for (std::size_t stage = stages.size(); stage-- > 0;)
    for (const json& param : stages[stage].front().layout.at("optimizer_params"))
      if (owner.at(param.get<std::string>()) == stage) order.push_back(param);
  for (const std::string& state : states) {
    TensorEntry whole;
    whole.name = "optimizer." + state + ".0";
    for (std::size_t stage = stages.size(); stage-- > 0;) {
      const auto& parts = stages[stage];
      std::vector<std::vector<float>> flats(parts.size());  // each rank's slices, concatenated
      for (std::size_t r = 0; r < parts.size(); ++r) {
        std::map<std::size_t, const TensorEntry*> slices;
        for (const TensorEntry& e : parts[r].file.tensors)
          if (const auto key = parseOptimizerStateName(e.name); key && key->state == state) slices[key->slice] = &e;
        for (const auto& [slice, e] : slices) flats[r].insert(flats[r].end(), e->values.begin(), e->values.end());
      }
      std::vector<std::size_t> at(parts.size(), 0);  // each rank's position in its flat state
      for (const json& param : parts.front().layout.at("optimizer_params")) {
        const std::string name = param.get<std::string>();
        const Shape local = shapeOf(parts.front().tensor(name));
        const auto n = static_cast<std::size_t>(local.numel());
        if (owner.at(name) == stage) {
          const std::vector<float> values = wholeOf(
              parts, name,
              [&](const RankPart& p) {
                const auto r = static_cast<std::size_t>(&p - parts.data());
                if (at[r] + n > flats[r].size())
                  throw CheckpointError(
                      fmt::format("{}: its optimizer state '{}' ends before parameter {}", p.path, state, name));
                return std::span<const float>(flats[r]).subspan(at[r], n);
              },
              local);
          whole.values.insert(whole.values.end(), values.begin(), values.end());
        }
        for (auto& a : at) a += n;
      }
    }
    whole.shape = {static_cast<std::int64_t>(whole.values.size())};
    out.tensors.push_back(std::move(whole));
  }
  out.metadata[kOptimizerParams] = order.dump();
  return out;
}

void consolidate(const std::string& input, const std::string& output) {
  auto io = makeHPUCheckpointIO();
  Checkpoint main = io->load(input);
  if (main.metadata.count(kDistributedCheckpoint)) {
    io->save(assembleDistributed(*io, input, main), output);
    return;
  }
  auto it = main.metadata.find("sharded_optimizer");
  if (it == main.metadata.end()) throw CheckpointError(input + " has no sharded optimizer state: nothing to consolidate");
  const int world = std::stoi(it->second);
  main.metadata.erase(it);
  // name -> full state, filled shard by shard.
  std::map<std::string, TensorEntry> full;
  for (int rank = 0; rank < world; ++rank) {
    const std::string path = shardPath(input, rank);
    const Checkpoint shard = io->load(path);
    const auto layout = nlohmann::json::parse(shard.meta("hpu_train.optimizer_shard"));
    if (layout.at("rank").get<int>() != rank || layout.at("world_size").get<int>() != world)
      throw CheckpointError(fmt::format("{} is not rank {} of {}'s {}-rank optimizer state", path, rank, input, world));
    const auto& slices = layout.at("slices");
    for (const TensorEntry& e : shard.tensors) {
      // Tensors come back in name order: the slice is the name's, not the position's.
      const auto key = parseOptimizerStateName(e.name);
      if (!key || key->slice >= slices.size())
        throw CheckpointError(fmt::format("{}: {} is not the optimizer state of one of its {} slices", path, e.name,
                                          slices.size()));
      const auto& s = slices.at(key->slice);
      const auto offset = s.at(0).get<std::size_t>(), size = s.at(1).get<std::size_t>(), total = s.at(2).get<std::size_t>();
      if (e.values.size() != size || offset + size > total)
        throw CheckpointError(fmt::format("{}: {} has {} values, its layout says [{}, {}) of {}", path, e.name,
                                          e.values.size(), offset, offset + size, total));
      TensorEntry& f = full[e.name];
      if (f.values.empty()) {
        f.name = e.name;
        f.shape = {static_cast<std::int64_t>(total)};
        f.values.assign(total, 0.0f);
      }
      std::copy(e.values.begin(), e.values.end(), f.values.begin() + static_cast<std::ptrdiff_t>(offset));
    }
  }
  for (auto& [name, entry] : full) main.tensors.push_back(std::move(entry));
  io->save(main, output);
}

}  // namespace hpu::core::checkpoint
