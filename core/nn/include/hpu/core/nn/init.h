// Parameter initialisation as torch's layers do it, drawn from the
// InitContext's generator (nothing is drawn on a shape-only device).
// A tensor-parallel rank's piece (`shard`, with `shape` the piece's) gets
// the values the whole parameter would: the whole is drawn, in order, and
// the rest discarded, so every layout starts from one device's weights.
#pragma once

#include "hpu/core/nn/module.h"

namespace hpu::core::nn {

// U(-bound, bound): torch's kaiming_uniform_(a=sqrt(5)) and bias init reduce
// to this with bound = 1/sqrt(fan_in).
Tensor uniformInit(InitContext& ctx, const Shape& shape, float bound, const Shard& shard = {});
// N(0, std^2).
Tensor normalInit(InitContext& ctx, const Shape& shape, float std = 1.0f, const Shard& shard = {});
// Every element `value`.
Tensor constantInit(InitContext& ctx, const Shape& shape, float value);
// Overwrites an existing parameter with N(0, std^2) draws (a model's own
// initialisation, as Hugging Face's _init_weights).
void fillNormal(InitContext& ctx, const Tensor& t, float std, const Shard& shard = {});
// Overwrites an existing parameter with `value`.
void fillConstant(const Tensor& t, float value);

}  // namespace hpu::core::nn
