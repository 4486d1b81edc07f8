#include "hpu/core/strategies/pipeline_order.h"

#include <algorithm>

#include "hpu/device/check.h"

namespace hpu::core {
namespace {

// Micro-batches [first, first + count): their forwards by groups of
// `stages`, each group through every chunk in turn.
std::vector<PipelineAction> forwards(int stages, int chunks, std::size_t first, std::size_t count) {
  std::vector<PipelineAction> out;
  const auto group = static_cast<std::size_t>(stages);
  for (std::size_t g = first; g < first + count; g += group) {
    const std::size_t end = std::min(g + group, first + count);
    for (int c = 0; c < chunks; ++c)
      for (std::size_t i = g; i < end; ++i) out.push_back({true, c, i});
  }
  return out;
}

// The backwards matching `fwd`: the same order, the chunks reversed.
std::vector<PipelineAction> backwardsOf(const std::vector<PipelineAction>& fwd, int chunks) {
  std::vector<PipelineAction> out;
  out.reserve(fwd.size());
  for (const PipelineAction& f : fwd) out.push_back({false, chunks - 1 - f.chunk, f.micro_batch});
  return out;
}

// `fwd` and their backwards: `warmup` forwards, then one forward and one
// backward in turn, then the backwards left.
void interleave(const std::vector<PipelineAction>& fwd, int chunks, std::size_t warmup,
                std::vector<PipelineAction>& out) {
  const std::vector<PipelineAction> bwd = backwardsOf(fwd, chunks);
  warmup = std::min(warmup, fwd.size());
  out.insert(out.end(), fwd.begin(), fwd.begin() + static_cast<std::ptrdiff_t>(warmup));
  std::size_t b = 0;
  for (std::size_t f = warmup; f < fwd.size(); ++f) {
    out.push_back(fwd[f]);
    out.push_back(bwd[b++]);
  }
  out.insert(out.end(), bwd.begin() + static_cast<std::ptrdiff_t>(b), bwd.end());
}

}  // namespace

std::size_t pipelineWarmup(int stage, int stages, int chunks, std::size_t micro_batches) {
  const auto before = static_cast<std::size_t>(stages - stage - 1);
  const std::size_t warmup =
      chunks == 1 ? before : before * 2 + static_cast<std::size_t>(chunks - 1) * static_cast<std::size_t>(stages);
  return std::min(warmup, micro_batches * static_cast<std::size_t>(chunks));
}

std::vector<PipelineAction> pipelineOrder(int stage, int stages, int chunks, std::size_t micro_batches, bool backward) {
  HPU_CHECK(stage >= 0 && stage < stages && chunks >= 1, "pipeline stage {} of {} with {} chunks", stage, stages, chunks);
  if (!backward) return forwards(stages, chunks, 0, micro_batches);
  std::vector<PipelineAction> out;
  if (chunks == 1) {
    // 1F1B: the groups' order is the micro-batches' order, whole or not.
    interleave(forwards(stages, 1, 0, micro_batches), 1, pipelineWarmup(stage, stages, 1, micro_batches), out);
    return out;
  }
  const auto group = static_cast<std::size_t>(stages);
  const std::size_t whole = micro_batches / group * group;
  interleave(forwards(stages, chunks, 0, whole), chunks, pipelineWarmup(stage, stages, chunks, whole), out);
  // The rest (fewer than a group): all forwards first, which cannot wait
  // on a backward (see the header).
  const std::vector<PipelineAction> rest = forwards(stages, chunks, whole, micro_batches - whole);
  interleave(rest, chunks, rest.size(), out);
  return out;
}

}  // namespace hpu::core
