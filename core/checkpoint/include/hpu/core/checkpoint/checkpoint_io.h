// CheckpointIO plugins own the bytes of checkpoints on disk (Lightning's
// CheckpointIO API). HPUCheckpointIO, the default, writes the safetensors
// format of checkpoint.h atomically.
#pragma once

#include <memory>
#include <string>

#include "hpu/core/checkpoint/checkpoint.h"

namespace hpu::core::checkpoint {

class CheckpointIO {
 public:
  virtual ~CheckpointIO() = default;
  virtual void save(const Checkpoint& ckpt, const std::string& path) = 0;
  // Throws CheckpointError for a missing, truncated or altered file.
  virtual Checkpoint load(const std::string& path) = 0;
  virtual void remove(const std::string& path) = 0;
};

std::unique_ptr<CheckpointIO> makeHPUCheckpointIO();

}  // namespace hpu::core::checkpoint
