// BackboneFinetuning: Lightning's callback (callbacks/finetuning.py). The
// model's backbone (LightningModule::backbone) is frozen when fit sets up;
// at the start of epoch unfreeze_backbone_at_epoch its parameters join the
// optimizer as a new parameter group with lr backbone_initial_lr (default:
// group 0's lr x backbone_initial_ratio_lr); at each later epoch's start
// that group's lr is multiplied by lambda_func, and, with should_align, held
// at group 0's lr once it would pass it. With train_bn, the backbone's batch
// norms train from the start (they stay in group 0); without, they are
// frozen too and stop updating their running statistics until unfrozen.
//
// The groups are part of the optimizer's checkpoint (Trainer::restore
// rebuilds them), so a resumed run continues with the backbone frozen or in
// its group; this callback's state is the backbone lr it last set.
// DeepSpeed is refused, as Lightning refuses it: ZeRO partitions the
// optimizer's groups once, at setup.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/nn/layers/batch_norm.h"
#include "hpu/core/trainer/trainer.h"

namespace hpu::core {
namespace {

using config::Type;
using nlohmann::json;

// lambda_func's default, Lightning's `multiplicative`: 2.0 for every epoch.
constexpr const char* kMultiplicative = "lightning.pytorch.callbacks.finetuning.multiplicative";

struct BackboneFinetuningOptions {
  std::int64_t unfreeze_backbone_at_epoch = 10;
  double lambda_factor = 2.0;  // what lambda_func returns for every epoch
  double backbone_initial_ratio_lr = 0.1;
  std::optional<double> backbone_initial_lr;
  bool should_align = true;
  bool train_bn = true;
  bool verbose = false;
  std::int64_t rounding = 12;
};

// Python's round(x, digits) as printed by an f-string: the shortest repr.
std::string rounded(double x, std::int64_t digits) {
  const double scale = std::pow(10.0, static_cast<double>(digits));
  const double r = std::nearbyint(x * scale) / scale;
  std::string s = fmt::format("{}", r);
  if (s.find_first_of(".e") == std::string::npos && std::isfinite(r)) s += ".0";
  return s;
}

class BackboneFinetuning final : public Callback {
 public:
  explicit BackboneFinetuning(BackboneFinetuningOptions o) : o_(o) {}
  std::string stateKey() const override { return "BackboneFinetuning"; }

  void setup(Trainer& t, data::Stage stage) override {
    if (stage != data::Stage::kFit) return;
    if (t.strategy().name() == "HPUDeepSpeedStrategy")
      throw UsageError(
          "The Finetuning callback does not support running with the DeepSpeed strategy. Choose a different strategy "
          "or disable the callback.");
    backbone_ = t.model().backbone();
    if (backbone_.empty())
      throw UsageError(fmt::format("The LightningModule should have a nn.Module `backbone` attribute: {} names none "
                                   "(the built-in models' backbone is every layer but the output layer)",
                                   t.model().typeName()));
    // A resumed run whose backbone already trains keeps its group.
    if (previous_backbone_lr_) return;
    std::vector<Tensor> frozen;
    forEachModule([&](nn::Module& m) {
      if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&m); bn != nullptr) {
        if (o_.train_bn) return;
        bn->setTrackRunningStats(false);
      }
      for (const auto& p : m.ownParameters()) frozen.push_back(p.tensor);
    });
    t.freezeParameters(frozen);
  }

  void onTrainEpochStart(Trainer& t) override {
    const std::int64_t epoch = t.currentEpoch();
    if (epoch < o_.unfreeze_backbone_at_epoch) return;
    const double current_lr = t.optimizer()->lr();
    double backbone_lr;
    if (epoch == o_.unfreeze_backbone_at_epoch) {
      backbone_lr = o_.backbone_initial_lr.value_or(current_lr * o_.backbone_initial_ratio_lr);
      unfreezeIntoGroup(t, backbone_lr);
    } else {
      if (!previous_backbone_lr_) return;  // resumed past the epoch, from a run that never unfroze
      backbone_lr = o_.lambda_factor * *previous_backbone_lr_;
      if (o_.should_align && backbone_lr > current_lr) backbone_lr = current_lr;
      t.optimizer()->setGroupLr(t.optimizer()->numGroups() - 1, backbone_lr);
    }
    previous_backbone_lr_ = backbone_lr;
    if (o_.verbose && t.isGlobalZero())
      spdlog::info("Current lr: {}, Backbone lr: {}", rounded(current_lr, o_.rounding),
                   rounded(backbone_lr, o_.rounding));
  }

  std::string stateJson() const override {
    return json{{"previous_backbone_lr", previous_backbone_lr_ ? json(*previous_backbone_lr_) : json(nullptr)}}.dump();
  }
  void loadStateJson(const std::string& s) override {
    const json j = json::parse(s);
    if (j.contains("previous_backbone_lr") && j["previous_backbone_lr"].is_number())
      previous_backbone_lr_ = j["previous_backbone_lr"].get<double>();
  }

 private:
  // Calls f on every module of the backbone, children before nothing: each
  // module once, with the parameters registered on it.
  template <class F>
  void forEachModule(F&& f) {
    std::vector<nn::Module*> stack(backbone_.rbegin(), backbone_.rend());
    while (!stack.empty()) {
      nn::Module* m = stack.back();
      stack.pop_back();
      f(*m);
      for (auto it = m->children().rbegin(); it != m->children().rend(); ++it) stack.push_back(it->second.get());
    }
  }

  // Lightning's unfreeze_and_add_param_group: the backbone trains again (its
  // batch norms track statistics again); what no group steps yet joins a new
  // group with `lr`, and what one already steps is left there, with
  // Lightning's warning.
  void unfreezeIntoGroup(Trainer& t, double lr) {
    std::vector<Tensor> params;
    bool skipped = false;
    forEachModule([&](nn::Module& m) {
      const bool bn = dynamic_cast<nn::BatchNorm2d*>(&m) != nullptr;
      if (bn) dynamic_cast<nn::BatchNorm2d&>(m).setTrackRunningStats(true);
      if (bn && !o_.train_bn) return;
      for (const auto& p : m.ownParameters()) {
        if (t.paramGroupOf(p.tensor))
          skipped = true;
        else
          params.push_back(p.tensor);
      }
    });
    if (skipped && t.isGlobalZero())
      spdlog::warn(
          "The provided params to be frozen already exist within another group of this optimizer. Those parameters "
          "will be skipped.\nHINT: Did you init your optimizer in `configure_optimizer` as such:\n {}(filter(lambda p: "
          "p.requires_grad, self.parameters()), ...) ",
          t.optimizer()->name());
    if (!params.empty()) t.addParamGroup(params, lr);
  }

  BackboneFinetuningOptions o_;
  std::vector<nn::Module*> backbone_;
  std::optional<double> previous_backbone_lr_;
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{
        config::ComponentKind::kCallback,
        "BackboneFinetuning",
        "lightning.pytorch.callbacks",
        {"BackboneFinetuning",
         "",
         {{"unfreeze_backbone_at_epoch", Type::integer().min(0), "10", "The epoch at whose start the backbone trains."},
          {"lambda_func", Type::anyOf({Type::string({kMultiplicative}), Type::real().min(0.0, true)}), kMultiplicative,
           "The backbone lr's factor per epoch: Lightning's multiplicative (2.0), or a number."},
          {"backbone_initial_ratio_lr", Type::real().min(0.0), "0.1",
           "The backbone's first lr as a fraction of the current lr."},
          {"backbone_initial_lr", Type::optional(Type::real().min(0.0)), "null",
           "The backbone's first lr (default: the current lr x backbone_initial_ratio_lr)."},
          {"should_align", Type::boolean(), "true", "Hold the backbone lr at the current lr once it reaches it."},
          {"initial_denom_lr", Type::real().min(0.0, true), "10.0",
           "Lightning's divisor for an unfreeze without an lr; BackboneFinetuning always gives one."},
          {"train_bn", Type::boolean(), "true", "Train the backbone's batch norms while it is frozen."},
          {"verbose", Type::boolean(), "false", "Log the current and the backbone lr at each epoch's start."},
          {"rounding", Type::integer().min(0), "12", "Digits of the lrs verbose logs."}}},
        "Freezes the model's backbone, then trains it from an epoch on with its own, growing lr."},
    [](const config::Params& p) {
      BackboneFinetuningOptions o;
      o.unfreeze_backbone_at_epoch = p.getInt("unfreeze_backbone_at_epoch");
      const config::Node& lambda = p.node("lambda_func");
      if (lambda.str() != kMultiplicative) o.lambda_factor = p.getFloat("lambda_func");
      o.backbone_initial_ratio_lr = p.getFloat("backbone_initial_ratio_lr");
      if (p.has("backbone_initial_lr")) o.backbone_initial_lr = p.getFloat("backbone_initial_lr");
      o.should_align = p.getBool("should_align");
      o.train_bn = p.getBool("train_bn");
      o.verbose = p.getBool("verbose");
      o.rounding = p.getInt("rounding");
      return std::make_unique<BackboneFinetuning>(o);
    });

}  // namespace
}  // namespace hpu::core
