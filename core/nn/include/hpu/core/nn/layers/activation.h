// Elementwise activations (torch.nn.ReLU, GELU, Tanh, Sigmoid, SiLU) as one
// layer class selected by kind.
#pragma once

#include <spdlog/fmt/fmt.h>

#include <vector>

#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

enum class ActivationKind { kReLU, kGELU, kGELUTanh, kTanh, kSigmoid, kSiLU };

class Activation : public Module {
 public:
  explicit Activation(ActivationKind kind) : kind_(kind) {}
  ActivationKind kind() const { return kind_; }
  std::string typeName() const override {
    switch (kind_) {
      case ActivationKind::kReLU:
        return "ReLU";
      case ActivationKind::kGELU:
      case ActivationKind::kGELUTanh:
        return "GELU";
      case ActivationKind::kTanh:
        return "Tanh";
      case ActivationKind::kSigmoid:
        return "Sigmoid";
      case ActivationKind::kSiLU:
        return "SiLU";
    }
    return "?";
  }
  Tensor forward(const Tensor& x) override {
    switch (kind_) {
      case ActivationKind::kReLU:
        return ops::relu(x);
      case ActivationKind::kGELU:
        return ops::gelu(x, false);
      case ActivationKind::kGELUTanh:
        return ops::gelu(x, true);
      case ActivationKind::kTanh:
        return ops::tanh(x);
      case ActivationKind::kSigmoid:
        return ops::sigmoid(x);
      case ActivationKind::kSiLU:
        return ops::silu(x);
    }
    return x;
  }

 private:
  ActivationKind kind_;
};

// An activation keeps its input's shape.
inline LayerBuild activationLayer(ActivationKind kind, const Shape& in) {
  return LayerBuild{std::make_shared<Activation>(kind), in};
}
inline const LayerRegistration kReLULayer{torchLayerSchema("ReLU", {}, "max(0, x)."),
                                          [](const config::Params&, InitContext&, const Shape& in, const std::string&) {
                                            return activationLayer(ActivationKind::kReLU, in);
                                          }};
inline const LayerRegistration kGELULayer{
    torchLayerSchema(
        "GELU", {{"approximate", config::Type::string({"none", "tanh"}), "none", "Exact (erf) or tanh approximation."}},
        "Gaussian error linear unit."),
    [](const config::Params& p, InitContext&, const Shape& in, const std::string&) {
      return activationLayer(p.getString("approximate") == "tanh" ? ActivationKind::kGELUTanh : ActivationKind::kGELU,
                             in);
    }};
inline const LayerRegistration kTanhLayer{torchLayerSchema("Tanh", {}, "Hyperbolic tangent."),
                                          [](const config::Params&, InitContext&, const Shape& in, const std::string&) {
                                            return activationLayer(ActivationKind::kTanh, in);
                                          }};
inline const LayerRegistration kSigmoidLayer{
    torchLayerSchema("Sigmoid", {}, "Logistic sigmoid."),
    [](const config::Params&, InitContext&, const Shape& in, const std::string&) {
      return activationLayer(ActivationKind::kSigmoid, in);
    }};

inline const LayerRegistration kSiLULayer{torchLayerSchema("SiLU", {}, "x * sigmoid(x)."),
                                          [](const config::Params&, InitContext&, const Shape& in, const std::string&) {
                                            return activationLayer(ActivationKind::kSiLU, in);
                                          }};

// SwiGLU on one input: its last dimension's first half is the gate, the
// second the value: silu(gate) * value.
class SwiGLU : public Module {
 public:
  std::string typeName() const override { return "SwiGLU"; }
  Tensor forward(const Tensor& x) override {
    const std::int64_t half = x.size(-1) / 2;
    const std::int64_t sizes[] = {half, half};
    const std::vector<Tensor> parts = ops::split(x, sizes);
    return ops::swiglu(parts[0], parts[1]);
  }
};

inline const LayerRegistration kSwiGLULayer{
    layerSchema("SwiGLU", {}, "silu(first half) * second half of the last dimension."),
    [](const config::Params&, InitContext&, const Shape& in, const std::string& where) {
      if (in[in.ndim() - 1] % 2 != 0)
        layerMisfit(where, fmt::format("SwiGLU needs an even last dimension; got {}", in.str()));
      Shape out = in;
      out[-1] = in[in.ndim() - 1] / 2;
      return LayerBuild{std::make_shared<SwiGLU>(), out};
    }};

}  // namespace hpu::core::nn
