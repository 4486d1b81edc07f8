#include "save_config_callback.h"

#include <spdlog/fmt/fmt.h>

#include <filesystem>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/app/root.h"
#include "hpu/core/config/print.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core::app {
namespace {

class SaveConfigCallback final : public Callback {
 public:
  SaveConfigCallback(config::Node config, bool overwrite) : config_(std::move(config)), overwrite_(overwrite) {}
  std::string stateKey() const override { return "SaveConfigCallback"; }

  void setup(Trainer& trainer, data::Stage stage) override {
    if (stage != data::Stage::kFit || !trainer.isGlobalZero()) return;
    const std::string path = (std::filesystem::path(trainer.logDir()) / "config.yaml").string();
    if (std::filesystem::exists(path) && !overwrite_)
      throw UsageError(
          fmt::format("{} already exists: refusing to overwrite the config of an earlier run. Delete it, "
                      "log to another directory (trainer.default_root_dir, trainer.logger's version), or "
                      "pass --save_config_overwrite",
                      path));
    writeFileAtomically(path, config::printConfig(config_, config::rootType(), {}));  // as --print_config
    for (const auto& logger : trainer.loggers()) logger->logConfig(config_);
  }

 private:
  config::Node config_;
  bool overwrite_;
};

}  // namespace

std::unique_ptr<Callback> makeSaveConfigCallback(config::Node config, bool overwrite) {
  return std::make_unique<SaveConfigCallback>(std::move(config), overwrite);
}

}  // namespace hpu::core::app
