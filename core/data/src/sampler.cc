#include "hpu/core/data/sampler.h"

#include "hpu/core/base/random.h"

namespace hpu::core::data {

std::int64_t samplesPerReplica(std::int64_t size, const SamplerOptions& o) {
  const std::int64_t n = o.num_replicas;
  if (n == 1) return size;
  return o.drop_last ? size / n : (size + n - 1) / n;
}

std::vector<std::int64_t> epochIndices(std::int64_t size, const SamplerOptions& o, std::int64_t epoch) {
  std::vector<std::int64_t> order;
  if (o.shuffle) {
    Generator g(o.seed, RandomStream::kShuffle, static_cast<std::uint64_t>(epoch));
    order = randomPermutation(size, g);
  } else {
    order.resize(static_cast<std::size_t>(size));
    for (std::int64_t i = 0; i < size; ++i) order[i] = i;
  }
  if (o.num_replicas == 1) return order;
  const std::int64_t per = samplesPerReplica(size, o);
  const std::int64_t total = per * o.num_replicas;
  for (std::int64_t i = size; i < total; ++i) order.push_back(order[(i - size) % size]);
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per));
  for (std::int64_t i = o.rank; i < total; i += o.num_replicas) mine.push_back(order[i]);
  return mine;
}

}  // namespace hpu::core::data
