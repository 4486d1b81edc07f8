// OnExceptionCheckpoint: Lightning's callback that saves a checkpoint when
// fit fails (an error in a step, a callback, or Ctrl-C), to
// <dirpath>/<filename>.ckpt, so the run can resume from where it stopped.
#include <spdlog/spdlog.h>

#include <filesystem>

#include "hpu/core/config/registry.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

class OnExceptionCheckpoint final : public Callback {
 public:
  OnExceptionCheckpoint(std::string dirpath, std::string filename)
      : dirpath_(std::move(dirpath)), filename_(std::move(filename)) {}
  std::string stateKey() const override { return "OnExceptionCheckpoint"; }

  void onException(Trainer& t, const std::exception&) override {
    if (t.stage() != data::Stage::kFit || t.optimizer() == nullptr) return;  // nothing trained yet
    const std::string path = (std::filesystem::path(dirpath_) / (filename_ + ".ckpt")).string();
    t.saveCheckpoint(path);
    if (t.isGlobalZero()) spdlog::warn("OnExceptionCheckpoint: saved {} (epoch {}, step {})", path, t.currentEpoch(), t.globalStep());
  }

 private:
  std::string dirpath_, filename_;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{config::ComponentKind::kCallback,
                            "OnExceptionCheckpoint",
                            "lightning.pytorch.callbacks",
                            {"OnExceptionCheckpoint",
                             "",
                             {{"dirpath", config::Type::string(), "null", "Directory of the checkpoint (required)."},
                              {"filename", config::Type::string(), "on_exception", "Its name, without .ckpt."}}},
                            "Saves a checkpoint when fit fails."},
    [](const config::Params& p) {
      return std::make_unique<OnExceptionCheckpoint>(p.getString("dirpath"), p.getString("filename"));
    });

}  // namespace
}  // namespace hpu::core
