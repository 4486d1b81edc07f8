// A training checkpoint in memory and its file format.
//
// Format: a safetensors file (https://github.com/huggingface/safetensors):
// 8-byte little-endian header length, a JSON header mapping tensor names to
// {dtype, shape, data_offsets} plus "__metadata__" (string -> string), then
// the raw little-endian tensor bytes. Any safetensors reader can load the
// weights ("model.<param>"); the training state (epoch, step, optimizer and
// scheduler state, RNG states, callback states, the resolved config) is in
// the metadata and in "optimizer.*" tensors. "hpu_train.crc32" in the
// metadata is the CRC-32 of the whole file with that value's 8 hex digits
// set to "00000000": a file without it, truncated or altered is refused.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hpu/device/dtype.h"

namespace hpu::core::checkpoint {

struct TensorEntry {
  std::string name;
  device::DType dtype = device::DType::kFloat32;  // stored dtype (float32, bfloat16, float16, int64)
  std::vector<std::int64_t> shape;
  // Values: floats for floating dtypes (exactly representable in `dtype`);
  // int64 values in `ints`.
  std::vector<float> values;
  std::vector<std::int64_t> ints;
};

struct Checkpoint {
  std::vector<TensorEntry> tensors;
  std::map<std::string, std::string> metadata;

  const TensorEntry* find(const std::string& name) const;
  const std::string& meta(const std::string& key) const;  // throws CheckpointError if absent
};

// Optimizer state tensors are named "optimizer.<state>.<slice>": state
// buffer <state> (exp_avg, momentum_buffer, ...) of parameter slice <slice>,
// slices numbered in bucket order. The parts of such a name, or nullopt.
struct OptimizerStateName {
  std::string state;
  std::size_t slice = 0;
};
std::optional<OptimizerStateName> parseOptimizerStateName(const std::string& tensor_name);

// The file holding rank `rank`'s share of a checkpoint's sharded optimizer
// state: "<checkpoint>.rank<rank>".
std::string shardPath(const std::string& checkpoint, int rank);

// Serialises to bytes / parses bytes (`origin` names the file in errors).
std::string encodeSafetensors(const Checkpoint& ckpt);
Checkpoint decodeSafetensors(const std::string& bytes, const std::string& origin);

// The same bytes as encodeSafetensors, written to `path` atomically
// (AtomicFile) as each tensor is encoded: besides `ckpt`, host memory holds
// the header and a piece of 1 MiB.
void writeSafetensorsFile(const Checkpoint& ckpt, const std::string& path);
// What decodeSafetensors gives for the file at `path`, read in pieces of 1
// MiB, each checksummed and copied into its tensors as it passes: besides the
// result, host memory holds the header and one piece. Throws CheckpointError
// for an unreadable, truncated, altered or malformed file.
Checkpoint readSafetensorsFile(const std::string& path);

// The metadata of the checkpoint file at `path`, read from its header alone:
// the checksum, which covers the whole file, is not verified. Throws
// CheckpointError for an unreadable file or a malformed header.
std::map<std::string, std::string> readMetadata(const std::string& path);

}  // namespace hpu::core::checkpoint
