// StochasticWeightAveraging: Lightning's SWA callback. From epoch
// swa_epoch_start (1-based; a fraction f means int(max_epochs * f)) the
// optimizer's lr follows torch's SWALR (annealed to swa_lrs over
// annealing_epochs, cos or linear) in place of the configured scheduler,
// and at the start of every epoch from swa_epoch_start to the last the
// running average of the weights takes in the weights as they are then
// (a + (w - a) / (n + 1), in float32 as torch's). When the last epoch's
// training batches are done, the averaged weights become the model's and,
// if the model has batch norm, its running statistics are recomputed as
// the cumulative average over one forward pass of the training data (torch's
// momentum=None), averaged across ranks: the epoch's validation and
// checkpoints then see the averaged model, as after Lightning's extra
// batch-norm epoch.
//
// The average is kept in host memory (device: cpu, Lightning's default) or
// on the training device (hpu, or null: the model's device). Its state in
// checkpoints is Lightning's: n_averaged, latest_update_epoch, the SWALR
// state and the averaged weights. Sharded models (parameters partitioned
// across ranks) are refused, as in Lightning.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/nn/layers/batch_norm.h"
#include "hpu/core/trainer/trainer.h"
#include "hpu/device/numerics.h"

namespace hpu::core {
namespace {

using json = nlohmann::json;
using config::Type;

// swa_epoch_start as given: an epoch (1-based) or a fraction of max_epochs.
struct EpochStart {
  std::optional<std::int64_t> epoch;
  double fraction = 0;
};

void collectBatchNorms(nn::Module& m, std::vector<nn::BatchNorm2d*>& out) {
  if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&m)) out.push_back(bn);
  for (auto& [name, child] : m.children()) collectBatchNorms(*child, out);
}

class StochasticWeightAveraging final : public Callback {
 public:
  StochasticWeightAveraging(double swa_lr, EpochStart start, std::int64_t annealing_epochs, bool cos_anneal,
                            bool on_host)
      : swa_lr_(swa_lr), start_(start), annealing_epochs_(annealing_epochs), cos_(cos_anneal), on_host_(on_host) {}
  std::string stateKey() const override { return "StochasticWeightAveraging"; }

  void setup(Trainer& t, data::Stage stage) override {
    if (stage == data::Stage::kFit && t.strategy().partitionsParameters())
      throw UsageError(fmt::format("StochasticWeightAveraging does not support sharded models (strategy {}); use "
                                   "trainer.strategy=hpu_parallel or a DeepSpeed stage below 3, or remove the callback",
                                   t.strategy().name()));
  }

  void onFitStart(Trainer& t) override {
    const std::int64_t max_epochs = t.options().max_epochs;
    if (max_epochs < 1)
      throw UsageError("StochasticWeightAveraging averages the weights per epoch up to trainer.max_epochs; set "
                       "trainer.max_epochs");
    const std::int64_t start = start_.epoch ? *start_.epoch : static_cast<std::int64_t>(max_epochs * start_.fraction);
    swa_start_ = std::max<std::int64_t>(start - 1, 0);
    swa_end_ = max_epochs - 1;
    batch_norms_.clear();
    collectBatchNorms(t.model(), batch_norms_);
  }

  void onTrainEpochStart(Trainer& t) override {
    const std::int64_t epoch = t.currentEpoch();
    if (epoch < swa_start_ || epoch > swa_end_) return;
    if (!scheduler_) initialize(t);
    if (epoch > latest_update_epoch_) {
      updateAverage(t);
      latest_update_epoch_ = epoch;
    }
  }

  // The last SWA epoch's training is done: the average becomes the model.
  void onTrainBatchEnd(Trainer& t, std::int64_t batch_idx) override {
    if (t.currentEpoch() != swa_end_ || batch_idx + 1 != t.numTrainingBatches() || average_.empty()) return;
    transferAverage(t);
    if (!batch_norms_.empty()) recomputeBatchNorm(t);
  }

  std::string stateJson() const override {
    json j{{"n_averaged", n_averaged_}, {"latest_update_epoch", latest_update_epoch_}};
    j["scheduler_state"] = scheduler_ ? json(scheduler_->state()) : json(nullptr);
    if (average_.empty()) {
      j["average_model_state"] = nullptr;
    } else {
      json weights = json::object();
      for (const nn::NamedTensor& a : average_) weights[a.name] = a.tensor.toHost();
      j["average_model_state"] = weights;
    }
    return j.dump();
  }
  void loadStateJson(const std::string& text) override {
    const json j = json::parse(text);
    n_averaged_ = j.at("n_averaged").get<std::int64_t>();
    latest_update_epoch_ = j.at("latest_update_epoch").get<std::int64_t>();
    restored_ = j;
  }

 private:
  // Swaps the scheduler for SWALR and allocates the average (from the
  // checkpoint's, when resuming).
  void initialize(Trainer& t) {
    const bool resuming = restored_.is_object() && !restored_["scheduler_state"].is_null();
    if (!resuming && t.currentEpoch() != swa_start_ && t.isGlobalZero())
      spdlog::warn("SWA is initializing after swa_start without any checkpoint data. This may be caused by loading "
                   "a checkpoint from an older version of PyTorch Lightning.");
    std::unique_ptr<optim::LRScheduler> swa = optim::makeSWALR(swa_lr_, annealing_epochs_, cos_);
    optim::LRScheduler* swa_ptr = swa.get();
    const double lr = t.optimizer()->lr();
    std::unique_ptr<optim::LRScheduler> replaced = t.replaceScheduler(std::move(swa));
    if (resuming) {
      swa_ptr->loadState(restored_["scheduler_state"].get<std::vector<double>>());
      t.optimizer()->setLr(lr);  // the checkpoint's lr, which SWALR's attach left as it was
    }
    scheduler_ = swa_ptr;
    if (replaced && t.isGlobalZero()) {
      if (replaced->interval() != optim::LRScheduler::Interval::kEpoch)
        spdlog::warn("SWA is currently only supported every epoch. Found {} stepping every step", replaced->name());
      spdlog::info("Swapping scheduler `{}` for `SWALR`", replaced->name());
    }

    device::Device* dev = &t.device();
    if (on_host_) {
      device::DeviceOptions host;
      host.memoryLimit = {std::numeric_limits<std::uint64_t>::max(), "host memory"};
      host_ = std::make_unique<device::Device>(-1, -1, t.device().spec().generation, host);
      dev = host_.get();
    }
    const json* saved = restored_.is_object() && restored_["average_model_state"].is_object()
                            ? &restored_["average_model_state"]
                            : nullptr;
    average_.clear();
    for (const nn::NamedTensor& p : t.model().namedParameters()) {
      Tensor a = Tensor::zeros(*dev, p.tensor.shape());
      if (saved != nullptr) {
        if (!saved->contains(p.name))
          throw CheckpointError(fmt::format("the StochasticWeightAveraging state of the checkpoint has no average of "
                                            "'{}': was it saved from this model?",
                                            p.name));
        const auto values = (*saved)[p.name].get<std::vector<float>>();
        if (static_cast<std::int64_t>(values.size()) != a.numel())
          throw CheckpointError(fmt::format("the StochasticWeightAveraging average of '{}' has {} values, the model {}",
                                            p.name, values.size(), a.numel()));
        std::copy(values.begin(), values.end(), a.data());
      }
      average_.push_back({p.name, a});
    }
    restored_ = nullptr;
  }

  void updateAverage(Trainer& t) {
    const std::vector<nn::NamedTensor> params = t.model().namedParameters();
    const auto divisor = static_cast<float>(n_averaged_ + 1);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::span<const float> w = std::as_const(params[i].tensor).values();
      const std::span<float> a = average_[i].tensor.values();
      for (std::size_t k = 0; k < a.size(); ++k) a[k] = n_averaged_ == 0 ? w[k] : a[k] + (w[k] - a[k]) / divisor;
    }
    ++n_averaged_;
  }

  void transferAverage(Trainer& t) {
    const std::vector<nn::NamedTensor> params = t.model().namedParameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      Tensor p = params[i].tensor;
      const std::span<const float> a = std::as_const(average_[i].tensor).values();
      std::copy(a.begin(), a.end(), p.data());
      if (p.dtype() == DType::kBFloat16 || p.dtype() == DType::kFloat16) device::roundInPlace(p.values(), p.dtype());
    }
    t.parametersReplaced();
  }

  // torch.optim.swa_utils.update_bn: running statistics reset (mean 0, var
  // 1), then the cumulative average over one pass; the momenta restored.
  void recomputeBatchNorm(Trainer& t) {
    std::vector<std::optional<float>> momenta;
    for (nn::BatchNorm2d* bn : batch_norms_) {
      std::ranges::fill(bn->running_mean.values(), 0.0f);
      std::ranges::fill(bn->running_var.values(), 1.0f);
      momenta.push_back(bn->momentum());
      bn->setMomentum(std::nullopt);
    }
    t.forwardTrainingData();
    for (std::size_t i = 0; i < batch_norms_.size(); ++i) batch_norms_[i]->setMomentum(momenta[i]);
    const int world = t.strategy().worldSize();
    if (world == 1) return;
    // Each rank averaged its own shard of the data: the ranks' averages.
    std::vector<double> sums;
    for (nn::BatchNorm2d* bn : batch_norms_)
      for (const Tensor* s : {&bn->running_mean, &bn->running_var})
        for (float v : std::as_const(*s).values()) sums.push_back(v);
    t.strategy().allReduceSum(sums);
    std::size_t k = 0;
    for (nn::BatchNorm2d* bn : batch_norms_)
      for (Tensor* s : {&bn->running_mean, &bn->running_var})
        for (float& v : s->values()) v = static_cast<float>(sums[k++] / world);
  }

  double swa_lr_;
  EpochStart start_;
  std::int64_t annealing_epochs_;
  bool cos_;
  bool on_host_;

  std::int64_t swa_start_ = 0, swa_end_ = 0;  // 0-based epochs
  std::vector<nn::BatchNorm2d*> batch_norms_;
  optim::LRScheduler* scheduler_ = nullptr;  // the SWALR, owned by the Trainer once SWA started
  std::unique_ptr<device::Device> host_;      // where the average lives with device: cpu
  std::vector<nn::NamedTensor> average_;      // per parameter, in namedParameters() order
  std::int64_t n_averaged_ = 0;
  std::int64_t latest_update_epoch_ = -1;
  json restored_;  // a checkpoint's state until SWA starts
};

HPU_REGISTER_COMPONENT(
    Callback,
    config::ComponentSchema{
        config::ComponentKind::kCallback,
        "StochasticWeightAveraging",
        "lightning.pytorch.callbacks",
        {"StochasticWeightAveraging",
         "",
         {{"swa_lrs", Type::anyOf({Type::real().min(0.0, true), Type::list(Type::real().min(0.0, true))}), "null",
           "The SWA learning rate (a list: one per parameter group; hpu-train's optimizers have one)."},
          {"swa_epoch_start", Type::anyOf({Type::integer().min(1), Type::real().min(0.0).max(1.0)}), "0.8",
           "The epoch (1-based) SWA starts at, or a fraction of max_epochs."},
          {"annealing_epochs", Type::integer().min(0), "10", "Epochs over which the lr anneals to swa_lrs."},
          {"annealing_strategy", Type::string({"cos", "linear"}), "cos", "The annealing curve."},
          {"avg_fn", Type::null(), "null", "The averaging function: null, the running mean (a Python callable in Lightning)."},
          {"device", Type::optional(Type::string({"cpu", "hpu"})), "cpu",
           "Where the averaged weights are kept: cpu (host memory), hpu or null (the training device)."}}},
        "Averages the weights of the last epochs (SWA) with SWALR's learning rates; batch norm is recomputed."},
    [](const config::Params& p) {
      const config::Node& lrs = p.node("swa_lrs");
      double swa_lr = 0;
      if (lrs.isSequence()) {
        const std::vector<double> list = p.getFloatList("swa_lrs");
        if (list.size() != 1)
          p.fail("swa_lrs", fmt::format("has {} learning rates; the optimizer has 1 parameter group", list.size()));
        swa_lr = list.front();
      } else {
        swa_lr = p.getFloat("swa_lrs");
      }
      EpochStart start;
      const std::string s = p.node("swa_epoch_start").str();
      if (auto epoch = config::parseInt(s))
        start.epoch = *epoch;
      else
        start.fraction = *config::parseFloat(s);
      return std::make_unique<StochasticWeightAveraging>(swa_lr, start, p.getInt("annealing_epochs"),
                                                         p.getString("annealing_strategy") == "cos",
                                                         p.has("device") && p.getString("device") == "cpu");
    });

}  // namespace
}  // namespace hpu::core
