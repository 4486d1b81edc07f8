// Consolidation of a checkpoint whose optimizer state is sharded over the
// ranks of a ZeRO run (<ckpt> plus <ckpt>.rank<R> files) into one file that
// any strategy and world size can resume from.
#pragma once

#include <string>

namespace hpu::core::checkpoint {

// Reads `input` and its rank files, writes the consolidated checkpoint to
// `output` atomically. Throws CheckpointError naming a missing or
// inconsistent shard.
void consolidate(const std::string& input, const std::string& output);

}  // namespace hpu::core::checkpoint
