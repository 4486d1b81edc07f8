#include "hpu/core/precision.h"

namespace hpu::core {
namespace {
class FullPrecision final : public PrecisionPlugin {
 public:
  std::string precision() const override { return "32-true"; }
};
}  // namespace

std::unique_ptr<PrecisionPlugin> makeFullPrecision() { return std::make_unique<FullPrecision>(); }

}  // namespace hpu::core
