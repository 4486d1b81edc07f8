// The accelerator and strategy classes a config may name.
#include "hpu/core/config/params.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/strategies/strategy.h"
#include "trainer_part_param.h"

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

// "hpu" (hpu:0), "hpu:N" or N: the index of a visible HPU.
int deviceIndex(const config::Params& p) {
  const config::Node& n = p.node("device");
  if (!n.quoted()) return static_cast<int>(config::asInt(n));
  const std::string& text = n.str();
  if (text == "hpu") return 0;
  const auto index = text.rfind("hpu:", 0) == 0 ? config::parseInt(text.substr(4)) : std::nullopt;
  if (!index || *index < 0) p.fail("device", "expected hpu, hpu:N or an index N, got '" + text + "'");
  return static_cast<int>(*index);
}

HPU_REGISTER_COMPONENT(
    Strategy,
    config::ComponentSchema{
        config::ComponentKind::kStrategy,
        "SingleHPUStrategy",
        "lightning_habana",
        {"SingleHPUStrategy",
         "",
         {{"device", config::Type::anyOf({config::Type::integer().min(0), config::Type::string()}), "hpu",
           "The visible HPU to train on: an index, hpu (hpu:0) or hpu:N."},
          trainerPartParam("accelerator", "trainer.accelerator"),
          trainerPartParam("checkpoint_io", "trainer.plugins (HPUCheckpointIO)"),
          trainerPartParam("precision_plugin", "trainer.precision or trainer.plugins (HPUPrecisionPlugin)")}},
        "One process on one HPU (strategy: hpu_single)."},
    [](const config::Params& p) { return makeSingleDeviceStrategy(deviceIndex(p)); });

}  // namespace
}  // namespace hpu::core
