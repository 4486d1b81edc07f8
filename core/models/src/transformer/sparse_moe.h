// Mixtral's sparse mixture of experts (MixtralSparseMoeBlock), in the layout
// its checkpoints store (block_sparse_moe.gate, block_sparse_moe.experts.E.
// {w1, w2, w3}): a router (gate, a linear map to one logit per expert)
// chooses each token's top-k experts by softmax probability; their weights
// are renormalised to sum to 1; each chosen expert (a SwiGLU MLP: w2(silu(w1
// x) * w3 x)) computes the token, and the outputs are summed with those
// weights. Dropless: every expert takes every token routed to it.
//
// With output_router_logits the loss adds transformers' load-balancing loss
// (Switch Transformer's): router_aux_loss_coef * E * sum_e f_e P_e over the
// forward's layers together, f_e the fraction of the k choices that went to
// expert e and P_e its mean probability. Its gradient reaches every layer's
// router once the whole forward has routed (RouterBalance), whichever layers
// activation checkpointing recomputes.
//
// Tensor parallel: each expert splits as a dense MLP (w1, w3 column-, w2
// row-parallel); the router is replicated and reads the whole hidden states.
//
// Expert parallel (InitContext::expert_parallel, a group of `ep` ranks):
// rank q holds experts [q E / ep, (q + 1) E / ep) under their numbers in the
// whole layer. Each rank routes its own tokens, sends each expert's rows to
// the rank holding it and gets their outputs back (two all-to-alls, each
// way again in backward; ops::exchangeRows), then sums them with its
// weights. Every expert and the router draw their initial values from
// streams of their own (CausalLM::InitPart::kExpert), so a rank's experts
// are one device's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "hpu/core/models/transformer_config.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/nn/module_list.h"

namespace hpu::core::models {

// The routing statistics of one forward, by decoder layer (a recomputed
// layer overwrites its own), and the load-balancing loss they give.
class RouterBalance {
 public:
  RouterBalance(std::int64_t experts, std::int64_t top_k);
  // Layer `layer` routed `rows` tokens to `experts` (row-major [rows, k]) with probabilities `probs` [rows, E].
  void record(std::int64_t layer, const std::vector<std::int64_t>& experts, const Tensor& probs);
  // E * sum_e f_e P_e over the recorded layers.
  double loss() const;
  // loss + coef * this->loss(); in backward, every router's probabilities
  // receive coef * dL * E f_e / rows per row (through routerProbabilities).
  Tensor addTo(const Tensor& loss, double coef);
  // The router's probabilities as the forward uses them: `probs` itself,
  // through which the load-balancing loss's gradient reaches the router.
  Tensor routerProbabilities(const Tensor& probs) const;

 private:
  struct Layer {
    std::vector<double> counts, probability_sums;  // per expert
    std::int64_t rows = 0;
  };
  std::int64_t experts_, top_k_;
  std::map<std::int64_t, Layer> layers_;
  std::shared_ptr<std::vector<float>> row_gradient_;
};

class SparseMoeBlock final : public nn::Module {
 public:
  SparseMoeBlock(nn::InitContext& ctx, const TransformerConfig& c, std::int64_t layer,
                 std::shared_ptr<RouterBalance> balance);
  std::string typeName() const override { return "MixtralSparseMoeBlock"; }
  std::string describe() const override;
  // Each rank calls the experts its tokens chose: ZeRO-3 gathers them all
  // with the block, as DeepSpeed does for Mixtral (set_z3_leaf_modules).
  bool zero3Leaf() const override { return true; }
  // x [B, T, hidden] -> [B, T, hidden].
  Tensor forward(const Tensor& x) override;

  nn::Child<nn::Linear> gate;
  nn::Child<nn::ModuleList> experts;

 private:
  // The rows of the experts of this block's whole layer, each expert's in
  // token order, sent to the ranks holding them and their outputs
  // returned: `parallel_in` [n, H] and the routing give [n k, H] in the
  // order of `rows` (expert after expert).
  Tensor expertOutputs(const Tensor& parallel_in, const std::vector<std::vector<std::int64_t>>& rows);
  std::int64_t layer_, top_k_, num_experts_;
  bool balance_loss_;
  ops::ParallelGroup* tp_;
  ops::ParallelGroup* ep_;
  std::int64_t first_expert_ = 0;  // of this rank's experts
  std::shared_ptr<RouterBalance> balance_;
};

}  // namespace hpu::core::models
