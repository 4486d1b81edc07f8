#include "sparse_moe.h"

#include <spdlog/fmt/fmt.h>

#include <numeric>

#include "hpu/core/base/errors.h"
#include "hpu/core/models/causal_lm.h"

namespace hpu::core::models {
namespace {

// One expert: Mixtral's SwiGLU MLP, w2(silu(w1 x) * w3 x).
class Expert final : public nn::Module {
 public:
  Expert(nn::InitContext& ctx, const TransformerConfig& c) {
    ops::ParallelGroup* tp = ctx.tensor_parallel;
    const nn::LinearParallel column = nn::splitAcross(tp, nn::ParallelSplit::kColumn);
    w1 = registerChild("w1", std::make_shared<nn::Linear>(ctx, c.hidden_size, c.intermediate_size, false, column));
    w2 = registerChild("w2", std::make_shared<nn::Linear>(ctx, c.intermediate_size, c.hidden_size, false,
                                                          nn::splitAcross(tp, nn::ParallelSplit::kRow)));
    w3 = registerChild("w3", std::make_shared<nn::Linear>(ctx, c.hidden_size, c.intermediate_size, false, column));
  }
  std::string typeName() const override { return "MixtralBlockSparseTop2MLP"; }
  Tensor forward(const Tensor& x) override { return w2(ops::swiglu(w1(x), w3(x))); }
  nn::Child<nn::Linear> w1, w2, w3;
};

}  // namespace

RouterBalance::RouterBalance(std::int64_t experts, std::int64_t top_k)
    : experts_(experts), top_k_(top_k), row_gradient_(std::make_shared<std::vector<float>>(experts, 0.0f)) {}

void RouterBalance::record(std::int64_t layer, const std::vector<std::int64_t>& experts, const Tensor& probs) {
  Layer& l = layers_[layer];
  l.counts.assign(static_cast<std::size_t>(experts_), 0.0);
  l.probability_sums.assign(static_cast<std::size_t>(experts_), 0.0);
  l.rows = probs.size(0);
  for (std::int64_t e : experts) l.counts[static_cast<std::size_t>(e)] += 1.0;
  if (probs.shapeOnly()) return;
  const std::vector<float> p = probs.toHost();
  for (std::size_t i = 0; i < p.size(); ++i) l.probability_sums[i % static_cast<std::size_t>(experts_)] += p[i];
}

double RouterBalance::loss() const {
  std::vector<double> counts(static_cast<std::size_t>(experts_), 0.0), sums = counts;
  double rows = 0;
  for (const auto& [layer, l] : layers_) {
    rows += static_cast<double>(l.rows);
    for (std::size_t e = 0; e < counts.size(); ++e) {
      counts[e] += l.counts[e];
      sums[e] += l.probability_sums[e];
    }
  }
  if (rows == 0) return 0.0;
  double total = 0;
  for (std::size_t e = 0; e < counts.size(); ++e) total += (counts[e] / rows) * (sums[e] / rows);
  return total * static_cast<double>(experts_);
}

Tensor RouterBalance::addTo(const Tensor& loss, double coef) {
  // d(loss)/d(p[l, t, e]) = E f_e / rows, the same for every router row.
  double rows = 0;
  std::vector<double> counts(static_cast<std::size_t>(experts_), 0.0);
  for (const auto& [layer, l] : layers_) {
    rows += static_cast<double>(l.rows);
    for (std::size_t e = 0; e < counts.size(); ++e) counts[e] += l.counts[e];
  }
  std::vector<double> per_row(counts.size(), 0.0);
  for (std::size_t e = 0; e < counts.size(); ++e)
    per_row[e] = rows == 0 ? 0.0 : coef * static_cast<double>(experts_) * counts[e] / (rows * rows);
  return ops::addScalarTerm(loss, coef * this->loss(), [row_gradient = row_gradient_, per_row](float dloss) {
    for (std::size_t e = 0; e < per_row.size(); ++e) (*row_gradient)[e] = static_cast<float>(dloss * per_row[e]);
  });
}

Tensor RouterBalance::routerProbabilities(const Tensor& probs) const { return ops::withRowGradient(probs, row_gradient_); }

SparseMoeBlock::SparseMoeBlock(nn::InitContext& ctx, const TransformerConfig& c, std::int64_t layer,
                               std::shared_ptr<RouterBalance> balance)
    : layer_(layer),
      top_k_(c.num_experts_per_tok),
      num_experts_(c.num_local_experts),
      balance_loss_(c.output_router_logits),
      tp_(ctx.tensor_parallel),
      ep_(ctx.expert_parallel != nullptr && ctx.expert_parallel->size() > 1 ? ctx.expert_parallel : nullptr),
      balance_(std::move(balance)) {
  const auto std = static_cast<float>(c.initializer_range);
  {
    CausalLM::PartInit at(ctx, CausalLM::InitPart::kExpert, CausalLM::expertStream(layer, -1));
    gate = registerChild("gate", std::make_shared<nn::Linear>(at.ctx, c.hidden_size, num_experts_, false));
    nn::fillNormal(at.ctx, gate->weight, std);
  }
  std::int64_t count = num_experts_;
  if (ep_) {
    if (num_experts_ % ep_->size() != 0)
      throw UsageError(fmt::format("MixtralForCausalLM: num_local_experts {} cannot be split across {} expert-parallel "
                                   "ranks; choose an expert_parallel_size that divides it",
                                   num_experts_, ep_->size()));
    count = num_experts_ / ep_->size();
    first_expert_ = count * ep_->rank();
  }
  experts = registerChild("experts", std::make_shared<nn::ModuleList>());
  for (std::int64_t e = first_expert_; e < first_expert_ + count; ++e) {
    CausalLM::PartInit at(ctx, CausalLM::InitPart::kExpert, CausalLM::expertStream(layer, e));
    auto expert = experts->append(std::make_shared<Expert>(at.ctx, c), e);
    for (const nn::NamedTensor& p : expert->namedParameters()) nn::fillNormal(at.ctx, p.tensor, std, p.shard);
  }
  if (ep_) experts->splitExperts(ep_->size());
}

std::string SparseMoeBlock::describe() const {
  return fmt::format("{} experts, top {}{}{}", num_experts_, top_k_,
                     ep_ ? fmt::format(", {} on each of {} expert-parallel ranks", experts->size(), ep_->size()) : "",
                     balance_loss_ ? ", load-balancing loss" : "");
}

Tensor SparseMoeBlock::forward(const Tensor& x) {
  const std::int64_t n = x.size(0) * x.size(1), h = x.size(2);
  const Tensor rows_in = ops::reshape(x, {n, h});
  // The router reads the whole hidden states on every tensor-parallel rank
  // (its gradient is whole there); the experts read them in the parallel region.
  Tensor probs = ops::softmax(gate(rows_in));
  if (balance_loss_) probs = balance_->routerProbabilities(probs);
  const ops::TopKRouting routing = ops::routerTopK(probs, top_k_, /*normalize=*/true);
  if (balance_loss_) balance_->record(layer_, routing.experts, probs);
  // Each expert's rows and their slots in the [n, k] weights, in token order.
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(num_experts_)), slots(rows.size());
  for (std::size_t i = 0; i < routing.experts.size(); ++i) {
    const auto e = static_cast<std::size_t>(routing.experts[i]);
    rows[e].push_back(static_cast<std::int64_t>(i) / top_k_);
    slots[e].push_back(static_cast<std::int64_t>(i));
  }
  const Tensor parallel_in = tp_ ? ops::toParallelRegion(rows_in, *tp_) : rows_in;
  if (ep_) {
    // Every expert's outputs in expert order: one list of rows and slots.
    std::vector<std::int64_t> all_rows, all_slots;
    for (std::size_t e = 0; e < rows.size(); ++e) {
      all_rows.insert(all_rows.end(), rows[e].begin(), rows[e].end());
      all_slots.insert(all_slots.end(), slots[e].begin(), slots[e].end());
    }
    const Tensor out = ops::combineRows(std::vector<Tensor>{expertOutputs(parallel_in, rows)},
                                        std::vector<std::vector<std::int64_t>>{all_rows},
                                        std::vector<std::vector<std::int64_t>>{all_slots}, routing.weights, n);
    return ops::reshape(out, x.shape());
  }
  // Experts that no token chose compute nothing (their parameters get no
  // gradient: nn::FlatParameters and ZeRO-3's leaf gathering cope).
  std::vector<std::size_t> active;
  std::vector<std::vector<std::int64_t>> active_rows, active_slots;
  for (std::size_t e = 0; e < rows.size(); ++e) {
    if (rows[e].empty()) continue;
    active.push_back(e);
    active_rows.push_back(std::move(rows[e]));
    active_slots.push_back(std::move(slots[e]));
  }
  std::vector<Tensor> inputs = ops::dispatchRows(parallel_in, active_rows);
  std::vector<Tensor> outputs;
  for (std::size_t i = 0; i < active.size(); ++i) {
    outputs.push_back((*experts)[active[i]](inputs[i]));
    inputs[i] = Tensor();  // an expert's input is freed once it has run (outside autograd)
  }
  const Tensor out = ops::combineRows(outputs, active_rows, active_slots, routing.weights, n);
  return ops::reshape(out, x.shape());
}

Tensor SparseMoeBlock::expertOutputs(const Tensor& parallel_in, const std::vector<std::vector<std::int64_t>>& rows) {
  const int ranks = ep_->size();
  const auto local = static_cast<std::int64_t>(experts->size());
  // What this rank sends each rank: the rows of its experts, expert after expert.
  std::vector<std::int64_t> sent(static_cast<std::size_t>(num_experts_));
  std::vector<std::int64_t> order, send_rows(static_cast<std::size_t>(ranks), 0);
  for (std::int64_t e = 0; e < num_experts_; ++e) {
    const auto& r = rows[static_cast<std::size_t>(e)];
    sent[static_cast<std::size_t>(e)] = static_cast<std::int64_t>(r.size());
    send_rows[static_cast<std::size_t>(e / local)] += static_cast<std::int64_t>(r.size());
    order.insert(order.end(), r.begin(), r.end());
  }
  // received[s * local + j]: the rows rank s sends for this rank's expert j.
  const std::vector<std::int64_t> received = ep_->alltoallCounts(sent, static_cast<std::size_t>(local));
  std::vector<std::int64_t> recv_rows(static_cast<std::size_t>(ranks), 0);
  for (int s = 0; s < ranks; ++s)
    for (std::int64_t j = 0; j < local; ++j) recv_rows[static_cast<std::size_t>(s)] += received[s * local + j];
  const Tensor dispatched = ops::dispatchRows(parallel_in, std::vector<std::vector<std::int64_t>>{order}).front();
  const Tensor arrived = ops::exchangeRows(dispatched, send_rows, recv_rows, *ep_);
  // The arrived rows come rank after rank, each rank's expert after expert:
  // each expert takes its rows from every rank, then they go back in the
  // order they came.
  std::vector<std::vector<std::int64_t>> of_expert(static_cast<std::size_t>(local));
  for (std::int64_t s = 0, at = 0; s < ranks; ++s)
    for (std::int64_t j = 0; j < local; ++j)
      for (std::int64_t i = 0; i < received[s * local + j]; ++i) of_expert[static_cast<std::size_t>(j)].push_back(at++);
  std::vector<std::int64_t> back(static_cast<std::size_t>(arrived.size(0)));  // each arrived row's output, in the concatenation
  std::vector<Tensor> outputs;
  for (std::int64_t j = 0, at = 0; j < local; ++j) {
    const auto& mine = of_expert[static_cast<std::size_t>(j)];
    if (mine.empty()) continue;  // an expert no rank routed a token to computes nothing
    const Tensor input = ops::dispatchRows(arrived, std::vector<std::vector<std::int64_t>>{mine}).front();
    outputs.push_back((*experts)[static_cast<std::size_t>(j)](input));
    for (std::int64_t row : mine) back[static_cast<std::size_t>(row)] = at++;
  }
  // No row arrived: an empty block goes back, through an expert so that it
  // has the dtype the other ranks' experts give theirs (autocast's bf16 while
  // the rows arrived in fp32).
  const Tensor computed = outputs.empty() ? (*experts)[0](arrived) : ops::concatRows(outputs);
  const Tensor returning = ops::dispatchRows(computed, std::vector<std::vector<std::int64_t>>{back}).front();
  return ops::exchangeRows(returning, recv_rows, send_rows, *ep_);
}

}  // namespace hpu::core::models
