#include "hpu/core/checkpoint/checkpoint_io.h"

#include <filesystem>

#include "hpu/core/config/registry.h"
#include "hpu/core/base/errors.h"

namespace hpu::core::checkpoint {
namespace {

class HPUCheckpointIO final : public CheckpointIO {
 public:
  void save(const Checkpoint& ckpt, const std::string& path) override { writeSafetensorsFile(ckpt, path); }
  Checkpoint load(const std::string& path) override {
    if (!std::filesystem::exists(path)) throw CheckpointError("checkpoint " + path + " does not exist");
    return readSafetensorsFile(path);
  }
  void remove(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

HPU_REGISTER_COMPONENT(CheckpointIO,
                       config::ComponentSchema{config::ComponentKind::kCheckpointIO,
                                               "HPUCheckpointIO",
                                               "lightning_habana",
                                               {"HPUCheckpointIO", "", {}},
                                               "Writes checkpoints as safetensors files, atomically."},
                       [](const config::Params&) { return makeHPUCheckpointIO(); });

}  // namespace

std::unique_ptr<CheckpointIO> makeHPUCheckpointIO() { return std::make_unique<HPUCheckpointIO>(); }

}  // namespace hpu::core::checkpoint
