#include "hpu/core/checkpoint/consolidate.h"

#include <spdlog/fmt/fmt.h>

#include <nlohmann/json.hpp>

#include <algorithm>
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
    return {.dim = s.at(0).get<int>(),
            .parts = s.at(1).get<int>(),
            .index = s.at(2).get<int>(),
            .blocks = s.at(3).get<int>(),
            .padding = s.size() > 4 ? s.at(4).get<std::int64_t>() : 0};
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

// The parameters of one pipeline stage in one device's bucket order, from
// the lists of its expert-parallel copies (each its own bucket order): the
// parameters every copy holds stand in every list in one order; between two
// of them each copy has its own experts, and one device holds the later
// copy's (higher-numbered) experts first, as it holds its parameters in
// reverse registration order.
std::vector<std::string> mergeCopies(const std::vector<std::vector<std::string>>& copies, const std::string& path) {
  if (copies.size() == 1) return copies.front();
  std::set<std::string> shared(copies.front().begin(), copies.front().end());
  for (const auto& list : copies) {
    const std::set<std::string> mine(list.begin(), list.end());
    std::erase_if(shared, [&](const std::string& name) { return !mine.count(name); });
  }
  // Each copy's list cut at the shared parameters: segments[c][i] comes before anchor i.
  std::vector<std::string> anchors;
  std::vector<std::vector<std::vector<std::string>>> segments(copies.size());
  for (std::size_t c = 0; c < copies.size(); ++c) {
    segments[c].emplace_back();
    std::size_t anchor = 0;
    for (const std::string& name : copies[c]) {
      if (!shared.count(name)) {
        segments[c].back().push_back(name);
        continue;
      }
      if (c == 0) anchors.push_back(name);
      if (anchor >= anchors.size() || anchors[anchor] != name)
        throw CheckpointError(fmt::format("{}: its expert-parallel ranks list their shared parameters in other orders",
                                          path));
      ++anchor;
      segments[c].emplace_back();
    }
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i <= anchors.size(); ++i) {
    for (std::size_t c = copies.size(); c-- > 0;) out.insert(out.end(), segments[c][i].begin(), segments[c][i].end());
    if (i < anchors.size()) out.push_back(anchors[i]);
  }
  return out;
}

}  // namespace

Checkpoint assembleDistributed(CheckpointIO& io, const std::string& path, const Checkpoint& main) {
  const json meta = json::parse(main.meta(kDistributedCheckpoint));
  const int tp = meta.at("tensor_parallel_size").get<int>();
  const int pp = meta.value("pipeline_parallel_size", 1);
  const int ep = meta.value("expert_parallel_size", 1);
  // The files that hold every parameter: each pipeline stage's tensor-parallel
  // ranks, in the first data-parallel copy, and with expert parallelism in
  // each of the first ep copies (which hold other experts each). Copy d's
  // stage s tensor-parallel rank k is rank (d pp + s) tp + k.
  std::vector<std::vector<RankPart>> stages;
  for (int stage = 0; stage < pp; ++stage)
    for (int copy = 0; copy < ep; ++copy) {
      std::vector<RankPart>& parts = stages.emplace_back();
      for (int k = 0; k < tp; ++k) {
        const int rank = (copy * pp + stage) * tp + k;
        RankPart part{shardPath(path, rank), io.load(shardPath(path, rank)), {}};
        part.layout = json::parse(part.file.meta(kTensorParallelPart));
        if (part.layout.at("rank").get<int>() != rank || part.layout.at("tensor_parallel_size").get<int>() != tp ||
            part.layout.value("pipeline_stage", 0) != stage)
          throw CheckpointError(fmt::format("{} is not tensor-parallel rank {} of {} of pipeline stage {} of {}'s {} x {} "
                                            "ranks",
                                            part.path, k, tp, stage, path, pp, tp));
        parts.push_back(std::move(part));
      }
    }
  Checkpoint out;
  out.metadata = main.metadata;
  out.metadata.erase(kDistributedCheckpoint);
  // The model: each parameter from the first stage (or expert-parallel copy)
  // that holds it (the last stage's copy of a tied embedding is the
  // first's), its pieces placed in the whole.
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
  // parameters' pieces, each parameter made whole (from the first part that
  // holds it), in the order one device's buckets hold them: a stage's
  // buckets hold its parameters last to first, so the stages go last to
  // first too, and within a stage the expert-parallel copies' lists merge
  // (mergeCopies).
  const auto params = [&](std::size_t part) {
    std::vector<std::string> out;
    for (const json& param : stages[part].front().layout.at("optimizer_params")) out.push_back(param.get<std::string>());
    return out;
  };
  std::map<std::string, std::size_t> owner;  // parameter -> the first part that holds it
  for (std::size_t part = stages.size(); part-- > 0;)
    for (const std::string& name : params(part)) owner[name] = part;
  std::vector<std::string> order;
  for (int stage = pp; stage-- > 0;) {
    std::vector<std::vector<std::string>> copies;
    for (int copy = 0; copy < ep; ++copy) copies.push_back(params(static_cast<std::size_t>(stage * ep + copy)));
    for (const std::string& name : mergeCopies(copies, path))
      if (owner.at(name) / static_cast<std::size_t>(ep) == static_cast<std::size_t>(stage) &&
          std::find(order.begin(), order.end(), name) == order.end())
        order.push_back(name);
  }
  for (const std::string& state : states) {
    // Each parameter's whole state, from the part that owns it.
    std::map<std::string, std::vector<float>> values;
    for (std::size_t part = 0; part < stages.size(); ++part) {
      const auto& parts = stages[part];
      std::vector<std::vector<float>> flats(parts.size());  // each rank's slices, concatenated
      for (std::size_t r = 0; r < parts.size(); ++r) {
        std::map<std::size_t, const TensorEntry*> slices;
        for (const TensorEntry& e : parts[r].file.tensors)
          if (const auto key = parseOptimizerStateName(e.name); key && key->state == state) slices[key->slice] = &e;
        for (const auto& [slice, e] : slices) flats[r].insert(flats[r].end(), e->values.begin(), e->values.end());
      }
      std::vector<std::size_t> at(parts.size(), 0);  // each rank's position in its flat state
      for (const std::string& name : params(part)) {
        const Shape local = shapeOf(parts.front().tensor(name));
        const auto n = static_cast<std::size_t>(local.numel());
        if (owner.at(name) == part)
          values[name] = wholeOf(
              parts, name,
              [&](const RankPart& p) {
                const auto r = static_cast<std::size_t>(&p - parts.data());
                if (at[r] + n > flats[r].size())
                  throw CheckpointError(
                      fmt::format("{}: its optimizer state '{}' ends before parameter {}", p.path, state, name));
                return std::span<const float>(flats[r]).subspan(at[r], n);
              },
              local);
        for (auto& a : at) a += n;
      }
    }
    TensorEntry whole;
    whole.name = "optimizer." + state + ".0";
    for (const std::string& name : order) whole.values.insert(whole.values.end(), values[name].begin(), values[name].end());
    whole.shape = {static_cast<std::int64_t>(whole.values.size())};
    out.tensors.push_back(std::move(whole));
  }
  out.metadata[kOptimizerParams] = json(order).dump();
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
