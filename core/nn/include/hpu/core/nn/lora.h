// LoRA (Hu et al. 2021), with PEFT's names and defaults: a frozen linear
// layer W (nn::Linear, or GPT-2's Conv1D) plus a trainable low-rank update,
//   y = W x + b + (alpha / r) * B A dropout(x),   A [r, in], B [out, r],
// A drawn as torch's Linear default (kaiming_uniform(a=sqrt(5)), as PEFT
// does), B zero: training starts from the base model's outputs.
//
// The wrapped layer keeps its parameter names (q_proj.weight, q_proj.bias),
// so pretrained weights and checkpoints map onto it as onto the plain layer;
// the adapters are its children lora_A and lora_B (q_proj.lora_A.weight),
// PEFT's names without the adapter name, as its adapter files store them.
//
// A tensor-parallel base layer splits its adapters with it (Megatron's and
// NeMo's LoRA): under a column-parallel W, B is split as W's rows (blocks
// and pieces alike) and A is whole on every rank, its gradient summed over
// the group; under a row-parallel W, A is split as W's columns, A x summed
// over the group (reduce-scattered along the sequence under sequence
// parallelism), and B is whole. Every rank then computes its part of the
// one-device update, and the adapters' shards save and consolidate as W's.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpu/core/nn/layers/linear.h"
#include "hpu/core/nn/module.h"

namespace hpu::core::nn {

// PEFT's LoraConfig, the fields hpu-train implements.
struct LoraSettings {
  std::int64_t r = 8;
  double lora_alpha = 8;
  float lora_dropout = 0.0f;
  // Module names: a layer whose path ends with ".<name>" (or is <name>) is
  // adapted. target_modules_regex, when set, instead: the whole path must
  // match it (PEFT's string form).
  std::vector<std::string> target_modules;
  std::string target_modules_regex;
  std::string bias = "none";  // none | all | lora_only: which biases train
  // Modules trained whole and saved with the adapters (a new head).
  std::vector<std::string> modules_to_save;
  bool use_rslora = false;  // scale alpha / sqrt(r) instead of alpha / r
  double scaling() const;
};

class LoraLinear : public Module {
 public:
  // Wraps `base` (an nn::Linear or nn::Conv1D). REQUIRES: s.r >= 1.
  LoraLinear(InitContext& ctx, std::shared_ptr<Module> base, const LoraSettings& s);
  std::string typeName() const override { return "LoraLinear"; }
  std::string describe() const override;
  Tensor forward(const Tensor& x) override;

  // The weight with B A (alpha / r) added, rounded to its dtype, as host
  // values: what merging for export writes (PEFT's merge_and_unload). The
  // layer is unchanged: merging again gives the same values. REQUIRES: not
  // on a shape-only device.
  std::vector<float> mergedWeight() const;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  // lora_dropout on x; a row-parallel layer's x holds this rank's columns
  // and gets them of the mask one device draws for the whole width.
  Tensor adapterInput(const Tensor& x) const;

  std::shared_ptr<Module> base_;
  Tensor weight_, bias_;
  bool weight_in_out_;  // Conv1D's [in, out] layout (PEFT's fan_in_fan_out)
  LinearParallel parallel_;  // the base layer's split
  double scaling_;
  float dropout_;
  Generator* rng_;
  // Called through the module tree, so that what replaces them there (a
  // precision plugin's fp8 layer) runs, inside the strategy's hooks (ZeRO-3's
  // gathering); their weights are these tensors whatever the layer.
  Child<Module> lora_a_, lora_b_;
  Tensor a_weight_, b_weight_;
};

// Replaces every nn::Linear / nn::Conv1D of `root` that `s` targets by a
// LoraLinear and freezes the rest as PEFT does: only the adapters, the biases
// `s.bias` names and the modules_to_save require gradients. Returns the
// paths of the adapted layers. Throws UsageError (naming target_modules)
// when a target is not a linear layer, or nothing matches and
// `require_match` (false: `root` is part of a model, a pipeline stage).
std::vector<std::string> applyLora(Module& root, InitContext& ctx, const LoraSettings& s, bool require_match = true);

// The name PEFT gives parameter `name` of `root` in its adapter files (less
// its "base_model.model." prefix): a LoraLinear's own weight and bias are its
// base layer's ("q_proj.base_layer.bias"), the rest keep their names.
std::string peftParameterName(const Module& root, const std::string& name);

// Whether parameter `name` is a LoRA adapter's (…lora_A.weight, …lora_B.weight).
inline bool isLoraAdapter(const std::string& name) {
  return name.find("lora_A.") != std::string::npos || name.find("lora_B.") != std::string::npos;
}

// The LoraLinear layers under `root`, by the name of their weight as
// root.namedParameters() gives it ("model.layers.0.self_attn.q_proj.weight").
std::map<std::string, const LoraLinear*> loraLayers(const Module& root);

}  // namespace hpu::core::nn
