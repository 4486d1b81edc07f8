#include "hpu/core/checkpoint/consolidate.h"

#include <spdlog/fmt/fmt.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
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

std::vector<TensorEntry> assembleDistributed(CheckpointIO& io, const std::string& path, const Checkpoint& main) {
  const json meta = json::parse(main.meta(kDistributedCheckpoint));
  const int ranks = meta.at("tensor_parallel_size").get<int>();
  std::vector<RankPart> parts;
  for (int rank = 0; rank < ranks; ++rank) {
    RankPart part{shardPath(path, rank), io.load(shardPath(path, rank)), {}};
    part.layout = json::parse(part.file.meta(kTensorParallelPart));
    if (part.layout.at("rank").get<int>() != rank || part.layout.at("tensor_parallel_size").get<int>() != ranks)
      throw CheckpointError(fmt::format("{} is not tensor-parallel rank {} of {}'s {} ranks", part.path, rank, path, ranks));
    parts.push_back(std::move(part));
  }
  std::vector<TensorEntry> out;
  // The model: each split parameter's pieces placed in the whole.
  std::map<std::string, std::vector<std::vector<float>>> state_flats;  // state -> rank -> its slices, concatenated
  for (const TensorEntry& e : parts.front().file.tensors) {
    if (const auto key = parseOptimizerStateName(e.name)) {
      auto& flats = state_flats[key->state];
      flats.resize(static_cast<std::size_t>(ranks));
      continue;
    }
    TensorEntry whole = e;
    if (const Shard s = parts.front().shardOf(e.name); s.split()) {
      const Shape local = shapeOf(e);
      whole.values = wholeOf(parts, e.name, [&](const RankPart& p) { return std::span<const float>(p.tensor(e.name).values); },
                             local);
      const Shape full = s.fullShape(local);
      whole.shape.assign(full.dims().begin(), full.dims().end());
    }
    out.push_back(std::move(whole));
  }
  // The optimizer state: each rank's slices in slice order, cut into its
  // parameters' pieces, each parameter made whole, one after the other.
  for (auto& [state, flats] : state_flats) {
    for (int rank = 0; rank < ranks; ++rank) {
      std::map<std::size_t, const TensorEntry*> slices;
      for (const TensorEntry& e : parts[static_cast<std::size_t>(rank)].file.tensors)
        if (const auto key = parseOptimizerStateName(e.name); key && key->state == state) slices[key->slice] = &e;
      for (const auto& [slice, e] : slices)
        flats[static_cast<std::size_t>(rank)].insert(flats[static_cast<std::size_t>(rank)].end(), e->values.begin(),
                                                     e->values.end());
    }
    TensorEntry whole;
    whole.name = "optimizer." + state + ".0";
    std::vector<std::size_t> at(static_cast<std::size_t>(ranks), 0);  // each rank's position in its flat state
    for (const json& param : parts.front().layout.at("optimizer_params")) {
      const std::string name = param.get<std::string>();
      const Shape local = shapeOf(parts.front().tensor(name));
      const auto n = static_cast<std::size_t>(local.numel());
      const std::vector<float> values = wholeOf(
          parts, name,
          [&](const RankPart& p) {
            const auto r = static_cast<std::size_t>(&p - parts.data());
            if (at[r] + n > flats[r].size())
              throw CheckpointError(fmt::format("{}: its optimizer state '{}' ends before parameter {}", p.path, state, name));
            return std::span<const float>(flats[r]).subspan(at[r], n);
          },
          local);
      for (auto& a : at) a += n;
      whole.values.insert(whole.values.end(), values.begin(), values.end());
    }
    whole.shape = {static_cast<std::int64_t>(whole.values.size())};
    out.push_back(std::move(whole));
  }
  return out;
}

void consolidate(const std::string& input, const std::string& output) {
  auto io = makeHPUCheckpointIO();
  Checkpoint main = io->load(input);
  if (main.metadata.count(kDistributedCheckpoint)) {
    main.tensors = assembleDistributed(*io, input, main);
    main.metadata.erase(kDistributedCheckpoint);
    io->save(main, output);
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
