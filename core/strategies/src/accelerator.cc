// The accelerator and strategy classes a config may name.
#include "hpu/core/config/registry.h"
#include "hpu/core/strategies/strategy.h"

namespace hpu::core {

// The emulated Gaudi. Its only job in a config is to be named
// (accelerator: hpu, or this class path); the devices come from the platform.
struct Accelerator {
  virtual ~Accelerator() = default;
};

namespace {

HPU_REGISTER_COMPONENT(Accelerator,
                       config::ComponentSchema{config::ComponentKind::kAccelerator,
                                               "HPUAccelerator",
                                               "lightning_habana",
                                               {"HPUAccelerator", "", {}},
                                               "The emulated Habana Gaudi (HPU)."},
                       [](const config::Params&) { return std::make_unique<Accelerator>(); });

HPU_REGISTER_COMPONENT(Strategy,
                       config::ComponentSchema{config::ComponentKind::kStrategy,
                                               "SingleHPUStrategy",
                                               "lightning_habana",
                                               {"SingleHPUStrategy",
                                                "",
                                                {{"device", config::Type::integer().min(0), "0",
                                                  "Index of the visible HPU to train on."}}},
                                               "One process on one HPU (strategy: hpu_single)."},
                       [](const config::Params& p) { return makeSingleDeviceStrategy(static_cast<int>(p.getInt("device"))); });

}  // namespace
}  // namespace hpu::core
