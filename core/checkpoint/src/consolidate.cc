#include "hpu/core/checkpoint/consolidate.h"

#include <spdlog/fmt/fmt.h>

#include <nlohmann/json.hpp>

#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu/core/checkpoint/checkpoint_io.h"
#include "hpu/core/base/errors.h"

namespace hpu::core::checkpoint {

void consolidate(const std::string& input, const std::string& output) {
  auto io = makeHPUCheckpointIO();
  Checkpoint main = io->load(input);
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
