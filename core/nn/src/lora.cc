#include "hpu/core/nn/lora.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "hpu/core/base/errors.h"
#include "hpu/core/nn/layers/conv1d.h"
#include "hpu/core/nn/layers/linear.h"
#include "hpu/core/ops/ops.h"
#include "hpu/device/numerics.h"

namespace hpu::core::nn {
namespace {

// PEFT's rule for a module name in target_modules / modules_to_save.
bool namedBy(const std::string& path, const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (path == n || path.ends_with("." + n)) return true;
  return false;
}

// The kInit sub-stream adapter `path` draws its A from: its own, so that
// its values do not depend on which other layers this process builds (a
// pipeline stage builds some). FNV-1a of the path, in streams of their own
// (the top byte 0xF1, past the model's).
std::uint64_t adapterStream(const std::string& path) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : path) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return (std::uint64_t{0xF1} << 56) | (h & ((std::uint64_t{1} << 56) - 1));
}

struct Walk {
  const LoraSettings& s;
  InitContext& ctx;
  std::optional<std::regex> regex;
  std::vector<std::string> adapted;

  void visit(Module& m, const std::string& prefix) {
    for (auto& [name, child] : m.mutableChildren()) {
      const std::string path = prefix + name;
      const bool target = regex ? std::regex_match(path, *regex) : namedBy(path, s.target_modules);
      if (target && !namedBy(path, s.modules_to_save)) {
        if (dynamic_cast<Linear*>(child.get()) == nullptr && dynamic_cast<Conv1D*>(child.get()) == nullptr)
          throw UsageError(fmt::format("model.init_args.lora.target_modules names {}, a {}; LoRA adapts Linear and "
                                       "Conv1D layers",
                                       path, child->typeName()));
        Generator rng(ctx.seed, RandomStream::kInit, adapterStream(path));
        InitContext adapter_ctx = withRng(ctx, rng);
        child = std::make_shared<LoraLinear>(adapter_ctx, child, s);
        adapted.push_back(path);
        continue;
      }
      visit(*child, path + ".");
    }
  }
};

void setTrainable(const Module& m, bool on) {
  for (const auto& p : m.namedParameters()) Tensor(p.tensor).setRequiresGrad(on);
}

// Trains the biases of `m`'s tree that `bias` names.
void trainBiases(Module& m, const std::string& bias, bool in_lora) {
  const bool lora = in_lora || dynamic_cast<LoraLinear*>(&m) != nullptr;
  for (const auto& p : m.ownParameters())
    if (p.name == "bias" && (bias == "all" || (bias == "lora_only" && lora))) Tensor(p.tensor).setRequiresGrad(true);
  for (auto& [name, child] : m.mutableChildren()) trainBiases(*child, bias, lora);
}

void trainModulesToSave(Module& m, const std::string& prefix, const std::vector<std::string>& names) {
  for (auto& [name, child] : m.mutableChildren()) {
    const std::string path = prefix + name;
    if (namedBy(path, names))
      setTrainable(*child, true);
    else
      trainModulesToSave(*child, path + ".", names);
  }
}

void collectLora(const Module& m, const std::string& prefix, std::map<std::string, const LoraLinear*>& out) {
  for (const auto& [name, child] : m.children()) {
    if (const auto* lora = dynamic_cast<const LoraLinear*>(child.get()))
      out.emplace(prefix + name + ".weight", lora);
    else
      collectLora(*child, prefix + name + ".", out);
  }
}

}  // namespace

double LoraSettings::scaling() const {
  return use_rslora ? lora_alpha / std::sqrt(static_cast<double>(r)) : lora_alpha / static_cast<double>(r);
}

LoraLinear::LoraLinear(InitContext& ctx, std::shared_ptr<Module> base, const LoraSettings& s)
    : base_(std::move(base)), scaling_(s.scaling()), dropout_(s.lora_dropout), rng_(&ctx.dropout_rng) {
  if (auto* l = dynamic_cast<Linear*>(base_.get())) {
    weight_ = l->weight, bias_ = l->bias, weight_in_out_ = false, parallel_ = l->parallel();
  } else {
    auto& c = dynamic_cast<Conv1D&>(*base_);
    weight_ = c.weight, bias_ = c.bias, weight_in_out_ = true, parallel_ = c.parallel();
  }
  // The whole layer's features.
  const Shape whole = base_->ownParameters().front().shard.fullShape(weight_.shape());
  const std::int64_t in = whole[weight_in_out_ ? 0 : 1], out = whole[weight_in_out_ ? 1 : 0];
  // The base layer's parameters, with their tensor-parallel pieces.
  for (const NamedTensor& p : base_->ownParameters()) adoptParameter(p.name, p.tensor, p.shard);
  InitContext adapter_ctx = ctx;
  adapter_ctx.param_dtype = weight_.dtype();
  LinearParallel a_split, b_split;
  switch (parallel_.split) {
    case ParallelSplit::kColumn:  // A whole, read with its gradient summed; B split as W's rows
      a_split = {.split = ParallelSplit::kNone, .group = parallel_.group, .replicas = parallel_.group};
      b_split = parallel_;
      break;
    case ParallelSplit::kRow:  // A split as W's columns, A x summed; B whole
      a_split = parallel_;
      break;
    case ParallelSplit::kNone:
      break;
  }
  auto a = std::make_shared<Linear>(adapter_ctx, in, s.r, false, a_split);
  auto b = std::make_shared<Linear>(adapter_ctx, s.r, out, false, b_split);
  if (!b->weight.shapeOnly()) std::fill(b->weight.values().begin(), b->weight.values().end(), 0.0f);
  a_weight_ = a->weight, b_weight_ = b->weight;
  lora_a_ = registerChild("lora_A", std::move(a));
  lora_b_ = registerChild("lora_B", std::move(b));
}

std::string LoraLinear::describe() const {
  return fmt::format("{}, r={}, scaling={}", base_->describe(), a_weight_.size(0),
                     scaling_);
}

Tensor LoraLinear::adapterInput(const Tensor& x) const {
  if (dropout_ == 0 || !training()) return x;
  if (parallel_.split != ParallelSplit::kRow) return ops::dropout(x, dropout_, true, *rng_);
  const std::int64_t columns = x.size(-1);
  Shape whole = x.shape();
  whole[-1] = columns * parallel_.parts();
  const Tensor mask = ops::dropout(Tensor::full(x.device(), whole, 1.0f, x.dtype()), dropout_, true, *rng_);
  return ops::mul(x, ops::narrow(mask, -1, parallel_.shard(0).index * columns, columns));
}

Tensor LoraLinear::forward(const Tensor& x) {
  Tensor y = base_->forward(x);
  const Tensor down = lora_a_(adapterInput(x));
  // A row-parallel layer's B reads positions of this rank's only under
  // sequence parallelism: its gradient is then summed over the group.
  const Tensor delta = parallel_.split == ParallelSplit::kRow
                           ? ops::linear(down, ops::sequenceParallelParameter(b_weight_, *parallel_.group), Tensor())
                           : lora_b_(down);
  return ops::add(y, scaling_ == 1.0 ? delta : ops::scale(delta, static_cast<float>(scaling_)));
}

std::vector<float> LoraLinear::mergedWeight() const {
  std::vector<float> w = weight_.toHost();
  const Tensor& a = a_weight_;  // [r, in]
  const Tensor& b = b_weight_;  // [out, r]
  const std::int64_t r = a.size(0), in = a.size(1), out = b.size(0);
  const std::span<const float> av = a.values(), bv = b.values();
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t i = 0; i < in; ++i) {
      double d = 0;
      for (std::int64_t k = 0; k < r; ++k) d += static_cast<double>(bv[o * r + k]) * av[k * in + i];
      w[static_cast<std::size_t>(weight_in_out_ ? i * out + o : o * in + i)] += static_cast<float>(scaling_ * d);
    }
  if (weight_.dtype() == DType::kBFloat16 || weight_.dtype() == DType::kFloat16)
    device::roundInPlace(w, weight_.dtype());
  return w;
}

std::vector<std::string> applyLora(Module& root, InitContext& ctx, const LoraSettings& s, bool require_match) {
  if (s.r < 1) throw UsageError("model.init_args.lora.r must be at least 1");
  if (s.bias != "none" && s.bias != "all" && s.bias != "lora_only")
    throw UsageError("model.init_args.lora.bias: '" + s.bias + "' is not none, all or lora_only");
  Walk walk{s, ctx, std::nullopt, {}};
  if (!s.target_modules_regex.empty()) {
    try {
      walk.regex.emplace(s.target_modules_regex);
    } catch (const std::regex_error& e) {
      throw UsageError(fmt::format("model.init_args.lora.target_modules: '{}' is not a regular expression ({})",
                                   s.target_modules_regex, e.what()));
    }
  }
  walk.visit(root, "");
  if (walk.adapted.empty() && require_match)
    throw UsageError(fmt::format("model.init_args.lora.target_modules: {} matches no layer of the model",
                                 s.target_modules_regex.empty()
                                     ? fmt::format("[{}]", fmt::join(s.target_modules, ", "))
                                     : "'" + s.target_modules_regex + "'"));
  setTrainable(root, false);
  for (const auto& p : root.namedParameters())
    if (isLoraAdapter(p.name)) Tensor(p.tensor).setRequiresGrad(true);
  if (s.bias != "none") trainBiases(root, s.bias, false);
  trainModulesToSave(root, "", s.modules_to_save);
  return walk.adapted;
}

std::map<std::string, const LoraLinear*> loraLayers(const Module& root) {
  std::map<std::string, const LoraLinear*> out;
  collectLora(root, "", out);
  return out;
}

std::string peftParameterName(const Module& root, const std::string& name) {
  const Module* m = &root;
  std::size_t at = 0;
  for (std::size_t dot; (dot = name.find('.', at)) != std::string::npos; at = dot + 1) {
    const std::string part = name.substr(at, dot - at);
    const auto& children = m->children();
    const auto it = std::find_if(children.begin(), children.end(), [&](const auto& c) { return c.first == part; });
    if (it == children.end()) return name;
    m = it->second.get();
  }
  if (dynamic_cast<const LoraLinear*>(m) == nullptr) return name;
  return name.substr(0, at) + "base_layer." + name.substr(at);
}

}  // namespace hpu::core::nn
