// The order in which one pipeline stage runs an optimizer step's
// micro-batches: 1F1B (PipeDream-flush, as DeepSpeed's and Megatron-LM's
// schedules) and its interleaved form over virtual stages (Megatron-LM's
// interleaved 1F1B: each stage holds `chunks` model chunks, stage s of P
// chunks s, s + P, s + 2P, ... of the P x chunks the layers are cut into).
//
// Forwards run in groups of P micro-batches: a group through chunk 0, the
// same group through chunk 1, ..., then the next group; backwards in the
// same order over the chunks reversed. Stage s first runs a warm-up of
// forwards, then alternates one forward and one backward, then runs the
// backwards left (cool-down):
//   1 chunk:      P - s - 1 forwards (stage 0 keeps up to P micro-batches'
//                 activations, the last stage one);
//   V > 1 chunks: (P - s - 1) x 2 + (V - 1) x P chunk forwards.
// Every stage issues a link's transfers in one order (the forwards' order is
// the same on every stage, and a chunk's successor on the next stage, or on
// stage 0 the next chunk, comes in that order too), so sends that never wait
// cannot deadlock. The interleaved order needs the micro-batches in whole
// groups of P (Megatron-LM's condition); micro-batches past the last whole
// group (an epoch's short last step) run after them, all their forwards
// first, then their backwards. Without backward: the forwards only
// (evaluation).
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <vector>

namespace hpu::core {

struct PipelineAction {
  bool forward = true;          // else backward
  int chunk = 0;                // this stage's chunk (0 .. chunks - 1)
  std::size_t micro_batch = 0;  // 0 .. micro_batches - 1
  bool operator==(const PipelineAction&) const = default;
};

// Stage `stage` of `stages`'s actions, in order. REQUIRES: 0 <= stage <
// stages, chunks >= 1.
std::vector<PipelineAction> pipelineOrder(int stage, int stages, int chunks, std::size_t micro_batches, bool backward);

// The forwards stage `stage` runs before its first backward in a step of
// `micro_batches` whole groups of `stages` (chunk forwards; 1F1B's warm-up).
std::size_t pipelineWarmup(int stage, int stages, int chunks, std::size_t micro_batches);

}  // namespace hpu::core
