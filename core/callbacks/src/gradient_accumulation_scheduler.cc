// GradientAccumulationScheduler: Lightning's callback that changes the
// micro-batches per optimizer step by epoch. scheduling: {epoch: factor}; from
// each listed epoch on, factor batches make one step (before the first
// listed epoch, 1). trainer.accumulate_grad_batches must then stay 1, as in
// Lightning.
#include <spdlog/fmt/fmt.h>

#include <map>

#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

class GradientAccumulationScheduler final : public Callback {
 public:
  explicit GradientAccumulationScheduler(std::map<std::int64_t, std::int64_t> scheduling)
      : scheduling_(std::move(scheduling)) {}
  std::string stateKey() const override { return "GradientAccumulationScheduler"; }

  void onFitStart(Trainer& t) override {
    if (t.options().accumulate_grad_batches != 1)
      throw UsageError(fmt::format(
          "trainer.accumulate_grad_batches is {} and trainer.callbacks has a GradientAccumulationScheduler; set "
          "accumulate_grad_batches to 1 and give every factor in the callback's scheduling",
          t.options().accumulate_grad_batches));
  }
  void onTrainEpochStart(Trainer& t) override { t.setAccumulateGradBatches(factorAt(t.currentEpoch())); }

 private:
  std::int64_t factorAt(std::int64_t epoch) const {
    std::int64_t factor = 1;
    for (const auto& [from, f] : scheduling_)
      if (from <= epoch) factor = f;
    return factor;
  }

  std::map<std::int64_t, std::int64_t> scheduling_;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{
        config::ComponentKind::kCallback,
        "GradientAccumulationScheduler",
        "lightning.pytorch.callbacks",
        {"GradientAccumulationScheduler",
         "",
         {{"scheduling", config::Type::dict(), "{}",
           "{epoch: factor}: from each epoch on, accumulate this many batches per optimizer step."}}},
        "Changes trainer.accumulate_grad_batches by epoch."},
    [](const config::Params& p) {
      std::map<std::int64_t, std::int64_t> scheduling;
      for (const auto& [key, value] : p.node("scheduling").entries()) {
        const auto epoch = config::parseInt(key);
        if (!epoch || *epoch < 0) p.fail("scheduling", fmt::format("epoch '{}' should be an int >= 0", key));
        const auto factor = value.isScalar() ? config::parseInt(value.str()) : std::nullopt;
        if (!factor || *factor < 1)
          p.fail("scheduling", fmt::format("the accumulation factor of epoch {} should be an int > 0", *epoch));
        scheduling[*epoch] = *factor;
      }
      if (scheduling.empty()) p.fail("scheduling", "give at least one {epoch: factor}");
      return std::make_unique<GradientAccumulationScheduler>(std::move(scheduling));
    });

}  // namespace
}  // namespace hpu::core
