// RotaryEmbedding: rotary position embeddings (RoPE, Hugging Face's
// rotate-half layout) of x [..., T, D] at positions 0 .. T - 1.
#pragma once

#include <spdlog/fmt/fmt.h>

#include <numeric>
#include <vector>

#include "hpu/core/nn/layer.h"
#include "hpu/core/ops/ops.h"

namespace hpu::core::nn {

// Positions first .. first + tokens - 1 as an int64 [tokens] tensor on `device`.
inline Tensor positionRange(device::Device& device, std::int64_t first, std::int64_t tokens) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(tokens));
  std::iota(p.begin(), p.end(), first);
  return Tensor::fromHost(device, {tokens}, p);
}

class RotaryEmbedding : public Module {
 public:
  explicit RotaryEmbedding(float theta) : theta_(theta) {}
  std::string typeName() const override { return "RotaryEmbedding"; }
  std::string describe() const override { return fmt::format("rope_theta={}", theta_); }
  Tensor forward(const Tensor& x) override {
    return ops::rotaryEmbedding(x, positionRange(x.device(), 0, x.size(x.ndim() - 2)), theta_);
  }

 private:
  float theta_;
};

inline const LayerRegistration kRotaryEmbeddingLayer{
    layerSchema("RotaryEmbedding",
                {{"rope_theta", config::Type::real().min(0.0, true), "10000.0", "Base of the rotation frequencies."}},
                "Rotates each [tokens, head_dim] pair of halves by its position (RoPE)."),
    [](const config::Params& p, InitContext&, const Shape& in, const std::string& where) {
      if (in.ndim() < 2 || in[-1] % 2 != 0)
        layerMisfit(where, fmt::format("RotaryEmbedding needs [..., tokens, head_dim] samples with an even head_dim; "
                                       "got {}",
                                       in.str()));
      return LayerBuild{std::make_shared<RotaryEmbedding>(static_cast<float>(p.getFloat("rope_theta"))), in};
    }};

}  // namespace hpu::core::nn
