// Consolidation of a checkpoint written by every rank (<ckpt> plus
// <ckpt>.rank<R> files) into one file that any strategy and layout can
// resume from:
//  - a ZeRO run's: the optimizer state is sharded over the ranks;
//  - a tensor- or pipeline-parallel run's distributed checkpoint
//    (ModelParallelStrategy's save_distributed_checkpoint): <ckpt> holds the
//    metadata, each rank file that rank's pieces of the model (its stage's
//    parameters, split across its tensor-parallel group) and of the optimizer
//    state, with how each parameter is split ("hpu_train.tensor_parallel").
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

// The metadata keys: in <ckpt>, {"world_size", "tensor_parallel_size",
// "strategy" (the strategy's name), "pipeline_parallel_size" (absent: 1),
// "virtual_pipeline_size" and "expert_parallel_size" (absent: 1),
// "vocabulary_padding" (the rows a padded vocabulary holds past its
// tokens, 0 unpadded; absent in older checkpoints)}; in each rank file, {"rank",
// "tensor_parallel_size", "pipeline_stage" (absent: 0), "shards": {name:
// [dim, parts, index, blocks, padding]} (split or padded parameters only;
// padding, a padded vocabulary's rows, absent: 0), "optimizer_params":
// the checkpoint names of the parameters the optimizer state holds, in
// order}.
inline constexpr const char* kDistributedCheckpoint = "distributed_checkpoint";
inline constexpr const char* kTensorParallelPart = "hpu_train.tensor_parallel";
// In a checkpoint of whole tensors: the checkpoint names of the parameters
// whose whole values its optimizer state holds one after the other (a JSON
// list; absent in older checkpoints, whose state follows the model's buckets).
inline constexpr const char* kOptimizerParams = "optimizer_params";

// The distributed checkpoint `path` (its metadata in `main`) in whole
// tensors: the model's and the optimizer state's as one device saves them
// (one slice per state, in kOptimizerParams' order), assembled from the
// files of the first data-parallel replica (ranks 0 .. pipeline x tensor
// parallel size - 1). Its metadata is main's, without kDistributedCheckpoint.
Checkpoint assembleDistributed(CheckpointIO& io, const std::string& path, const Checkpoint& main);

}  // namespace hpu::core::checkpoint
