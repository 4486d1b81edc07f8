// Consolidation of a checkpoint written by every rank (<ckpt> plus
// <ckpt>.rank<R> files) into one file that any strategy and layout can
// resume from:
//  - a ZeRO run's: the optimizer state is sharded over the ranks;
//  - a tensor-parallel run's distributed checkpoint (ModelParallelStrategy's
//    save_distributed_checkpoint): <ckpt> holds the metadata, each rank file
//    that rank's pieces of the model and of the optimizer state, with how
//    each parameter is split ("hpu_train.tensor_parallel").
#pragma once

#include <string>
#include <vector>

#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu/core/checkpoint/checkpoint_io.h"

namespace hpu::core::checkpoint {

// Reads `input` and its rank files, writes the consolidated checkpoint to
// `output` atomically. Throws CheckpointError naming a missing or
// inconsistent shard.
void consolidate(const std::string& input, const std::string& output);

// The metadata keys: in <ckpt>, {"world_size", "tensor_parallel_size"}; in
// each rank file, {"rank", "tensor_parallel_size", "shards": {name: [dim,
// parts, index, blocks]} (split parameters only), "optimizer_params": the
// checkpoint names of the parameters the optimizer state holds, in order}.
inline constexpr const char* kDistributedCheckpoint = "distributed_checkpoint";
inline constexpr const char* kTensorParallelPart = "hpu_train.tensor_parallel";

// The whole tensors of the distributed checkpoint `path` (its metadata in
// `main`): the model's and the optimizer state's as one device saves them
// (one slice per state), assembled from the files of tensor-parallel ranks
// 0 .. tensor_parallel_size - 1.
std::vector<TensorEntry> assembleDistributed(CheckpointIO& io, const std::string& path, const Checkpoint& main);

}  // namespace hpu::core::checkpoint
