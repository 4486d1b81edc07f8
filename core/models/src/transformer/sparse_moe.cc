#include "sparse_moe.h"

#include <spdlog/fmt/fmt.h>

#include <numeric>

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
      balance_loss_(c.output_router_logits),
      tp_(ctx.tensor_parallel),
      balance_(std::move(balance)) {
  gate = registerChild("gate", std::make_shared<nn::Linear>(ctx, c.hidden_size, c.num_local_experts, false));
  experts = registerChild("experts", std::make_shared<nn::ModuleList>());
  for (std::int64_t e = 0; e < c.num_local_experts; ++e) experts->append(std::make_shared<Expert>(ctx, c));
}

std::string SparseMoeBlock::describe() const {
  return fmt::format("{} experts, top {}{}", experts->size(), top_k_, balance_loss_ ? ", load-balancing loss" : "");
}

Tensor SparseMoeBlock::forward(const Tensor& x) {
  const std::int64_t n = x.size(0) * x.size(1), h = x.size(2);
  const auto count = static_cast<std::int64_t>(experts->size());
  const Tensor rows_in = ops::reshape(x, {n, h});
  // The router reads the whole hidden states on every tensor-parallel rank
  // (its gradient is whole there); the experts read them in the parallel region.
  Tensor probs = ops::softmax(gate(rows_in));
  if (balance_loss_) probs = balance_->routerProbabilities(probs);
  const ops::TopKRouting routing = ops::routerTopK(probs, top_k_, /*normalize=*/true);
  if (balance_loss_) balance_->record(layer_, routing.experts, probs);
  // Each expert's rows and their slots in the [n, k] weights, in token order.
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(count)), slots(rows.size());
  for (std::size_t i = 0; i < routing.experts.size(); ++i) {
    const auto e = static_cast<std::size_t>(routing.experts[i]);
    rows[e].push_back(static_cast<std::int64_t>(i) / top_k_);
    slots[e].push_back(static_cast<std::int64_t>(i));
  }
  // Experts that no token chose compute nothing.
  std::vector<std::size_t> active;
  for (std::size_t e = 0; e < rows.size(); ++e)
    if (!rows[e].empty()) active.push_back(e);
  std::vector<std::vector<std::int64_t>> active_rows, active_slots;
  for (std::size_t e : active) {
    active_rows.push_back(std::move(rows[e]));
    active_slots.push_back(std::move(slots[e]));
  }
  const Tensor parallel_in = tp_ ? ops::toParallelRegion(rows_in, *tp_) : rows_in;
  std::vector<Tensor> inputs = ops::dispatchRows(parallel_in, active_rows);
  std::vector<Tensor> outputs;
  for (std::size_t i = 0; i < active.size(); ++i) {
    outputs.push_back((*experts)[active[i]](inputs[i]));
    inputs[i] = Tensor();  // an expert's input is freed once it has run (outside autograd)
  }
  const Tensor out = ops::combineRows(outputs, active_rows, active_slots, routing.weights, n);
  return ops::reshape(out, x.shape());
}

}  // namespace hpu::core::models
