// Tensor parallelism's ops and split layers, N ranks against one: each rank
// is a thread with its own device and a tensor-parallel group over
// in-memory process groups. Split layers start from the pieces of the whole
// layer's initial weights, compute its outputs, and get its gradients: the
// pieces of the whole gradient, or (replicated key/value heads) the whole
// gradient of the piece they share.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

#include "hpu/comm/in_memory.h"
#include "hpu/core/nn/layers.h"
#include "hpu/core/ops/parallel.h"
#include "hpu/core/strategies/strategy.h"
#include "hpu/core/tensor/autograd.h"
#include "test_support.h"

namespace hpu::core::testing {
namespace {

using autograd::Tape;
using autograd::TapeScope;

// Devices 1..4 are the ranks'; device 0 the whole layer's.
device::Device& deviceOf(int index) {
  static device::Platform platform =
      device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "5"}, {"PT_HPU_LAZY_MODE", "0"}});
  return platform.device(index);
}

// Runs body(rank, group, device) on `ranks` threads; rethrows the first
// failure.
void onRanks(int ranks, const std::function<void(int, ops::ParallelGroup&, device::Device&)>& body) {
  auto groups = comm::makeInMemoryProcessGroups(ranks);
  std::vector<std::unique_ptr<ops::ParallelGroup>> tp;
  for (auto& g : groups) tp.push_back(makeTensorParallelGroup(std::move(g)));
  std::exception_ptr failure;
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r, *tp[static_cast<std::size_t>(r)], deviceOf(r + 1));
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

std::vector<float> normals(std::size_t n, std::uint64_t seed) {
  Generator g(seed);
  std::vector<float> v(n);
  for (float& x : v) x = g.normal();
  return v;
}

// Columns [first, first + count) of a [rows, cols] matrix.
std::vector<float> columns(const std::vector<float>& m, std::int64_t cols, std::int64_t first, std::int64_t count) {
  std::vector<float> out;
  for (std::size_t r = 0; r < m.size() / static_cast<std::size_t>(cols); ++r)
    out.insert(out.end(), m.begin() + static_cast<std::ptrdiff_t>(r * cols + first),
               m.begin() + static_cast<std::ptrdiff_t>(r * cols + first + count));
  return out;
}

void expectNear(const std::vector<float>& got, const std::vector<float>& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance * (1.0 + std::abs(want[i]))) << what << "[" << i << "]";
}

// ops::crossEntropy of logits [rows, columns] on one device: the loss and
// the logits' gradient.
std::pair<float, std::vector<float>> crossEntropyOf(const std::vector<float>& logits, std::int64_t rows,
                                                    std::int64_t columns, const std::vector<std::int64_t>& labels,
                                                    const ops::CrossEntropyOptions& o) {
  Tensor whole = Tensor::fromHost(deviceOf(0), {rows, columns}, logits);
  whole.setRequiresGrad(true);
  Tape tape;
  TapeScope scope(&tape);
  const Tensor loss = ops::crossEntropy(whole, Tensor::fromHost(deviceOf(0), {rows}, labels), o);
  tape.backward(loss);
  return {loss.item(), whole.grad().toHost()};
}

TEST(TensorParallelOps, CrossEntropyOverASplitVocabularyIsTheWholeOnes) {
  const std::int64_t rows = 6, vocab = 8;
  const std::vector<float> logits = normals(static_cast<std::size_t>(rows * vocab), 3);
  const std::vector<std::int64_t> labels{0, 7, -100, 3, 4, 5};  // both halves, and an ignored row
  const auto [want_loss, want_grad] = crossEntropyOf(logits, rows, vocab, labels, {});
  onRanks(2, [&](int rank, ops::ParallelGroup& group, device::Device& dev) {
    const std::int64_t part = vocab / 2;
    Tensor mine = Tensor::fromHost(dev, {rows, part}, columns(logits, vocab, rank * part, part));
    mine.setRequiresGrad(true);
    Tape t;
    TapeScope scope(&t);
    const Tensor loss = ops::vocabParallelCrossEntropy(mine, Tensor::fromHost(dev, {rows}, labels), rank * part, vocab, group);
    EXPECT_NEAR(loss.item(), want_loss, 1e-6);
    t.backward(loss);
    expectNear(mine.grad().toHost(), columns(want_grad, vocab, rank * part, part), 1e-6, "logits' gradient");
  });
}

// A padded vocabulary of 5 tokens on 4 ranks (a multiple of 8: 2 rows each,
// token 4 on rank 2 beside a padding row, rank 3 padding only), and on one
// rank (a multiple of 4: 3 padding rows): the padding columns, however large
// their logits, take no probability and get no gradient; the loss and the
// tokens' gradients are the unpadded vocabulary's.
TEST(TensorParallelOps, CrossEntropyLeavesAPaddedVocabularysRowsOut) {
  const std::int64_t rows = 4, vocab = 5, padded = 8, part = 2;
  const std::vector<float> logits = normals(static_cast<std::size_t>(rows * vocab), 5);
  const std::vector<std::int64_t> labels{0, 4, -100, 3};
  const auto [want_loss, want_grad] = crossEntropyOf(logits, rows, vocab, labels, {});
  // The logits with padding columns of 50 (a -inf mask's opposite).
  std::vector<float> with_padding;
  for (std::int64_t r = 0; r < rows; ++r) {
    with_padding.insert(with_padding.end(), logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
    with_padding.insert(with_padding.end(), padded - vocab, 50.0f);
  }
  const auto [loss, grad] = crossEntropyOf(with_padding, rows, padded, labels, {.classes = vocab});
  EXPECT_NEAR(loss, want_loss, 1e-6);
  expectNear(columns(grad, padded, 0, vocab), want_grad, 1e-6, "one rank: the tokens' gradient");
  EXPECT_EQ(columns(grad, padded, vocab, padded - vocab), std::vector<float>(rows * (padded - vocab), 0.0f));
  onRanks(4, [&](int rank, ops::ParallelGroup& group, device::Device& dev) {
    Tensor mine = Tensor::fromHost(dev, {rows, part}, columns(with_padding, padded, rank * part, part));
    mine.setRequiresGrad(true);
    Tape t;
    TapeScope scope(&t);
    const Tensor loss =
        ops::vocabParallelCrossEntropy(mine, Tensor::fromHost(dev, {rows}, labels), rank * part, vocab, group);
    EXPECT_NEAR(loss.item(), want_loss, 1e-6);
    t.backward(loss);
    const std::vector<float> grad = mine.grad().toHost();
    const std::int64_t tokens = std::clamp<std::int64_t>(vocab - rank * part, 0, part);
    expectNear(columns(grad, part, 0, tokens), columns(want_grad, vocab, rank * part, tokens), 1e-6,
               "the tokens' gradient");
    EXPECT_EQ(columns(grad, part, tokens, part - tokens), std::vector<float>(rows * (part - tokens), 0.0f))
        << "rank " << rank << "'s padding columns";
  });
}

// Shard's runs cover a padded vocabulary's real rows only: 7 rows padded to
// 8 on 2 ranks ([4, 3] pieces, rank 1's last row padding) and to 12 on one.
TEST(TensorParallelLayers, PaddedPiecesHoldTheWholeParameterAndZeroRows) {
  const Shape local{4, 3};
  std::vector<float> whole(21);
  std::iota(whole.begin(), whole.end(), 1.0f);
  std::vector<float> assembled(21, 0.0f);
  for (int rank = 0; rank < 2; ++rank) {
    const Shard s = Shard::paddedPiece(0, 7, 4, 2, rank);
    EXPECT_EQ(s.padding, 1);
    EXPECT_EQ(s.fullShape(local), (Shape{7, 3}));
    EXPECT_EQ(s.paddingNumel(local), 3);
    std::vector<float> piece(12, -1.0f);
    s.take(local, whole, piece);
    for (std::size_t i = 0; i < 12; ++i)
      EXPECT_EQ(piece[i], rank == 1 && i >= 9 ? -1.0f : whole[rank * 12 + i]) << "rank " << rank << ", element " << i;
    s.place(local, piece, assembled);
  }
  EXPECT_EQ(assembled, whole);
  const Shard one = Shard::paddedPiece(0, 7, 12, 1, 0);
  EXPECT_TRUE(one.split());
  std::vector<float> padded(whole);
  padded.resize(36, 0.0f);
  EXPECT_EQ(one.whole(Shape{12, 3}, padded), whole);
  EXPECT_EQ(paddedRows(50257, 128 * 8), 51200);
}

TEST(TensorParallelOps, LabelsOutsideTheWholeVocabularyAreRefused) {
  EXPECT_THROW(
      onRanks(2,
              [](int rank, ops::ParallelGroup& group, device::Device& dev) {
                const Tensor logits = Tensor::fromHost(dev, {1, 4}, std::vector<float>(4, 0.0f));
                try {
                  ops::vocabParallelCrossEntropy(logits, Tensor::fromHost(dev, {1}, std::vector<std::int64_t>{8}),
                                                 rank * 4, 8, group);
                } catch (const Error& e) {
                  EXPECT_STREQ(e.what(), "cross_entropy: label 8 of sample 0 is outside the 8 classes");
                  throw;
                }
              }),
      Error);
}

TEST(TensorParallelOps, GatherConcatenatesTheLastDimensionAndScattersItsGradient) {
  onRanks(2, [](int rank, ops::ParallelGroup& group, device::Device& dev) {
    Tensor x = Tensor::fromHost(dev, {2, 2}, std::vector<float>{1.0f + rank, 2.0f + rank, 3.0f + rank, 4.0f + rank});
    x.setRequiresGrad(true);
    Tape t;
    TapeScope scope(&t);
    const Tensor y = ops::gatherFromParallel(x, group);
    EXPECT_EQ(y.toHost(), (std::vector<float>{1, 2, 2, 3, 3, 4, 4, 5}));
    t.backward(ops::sum(ops::mul(y, Tensor::fromHost(dev, {2, 4}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}))));
    EXPECT_EQ(x.grad().toHost(), rank == 0 ? (std::vector<float>{1, 2, 5, 6}) : (std::vector<float>{3, 4, 7, 8}));
  });
}

// Expert parallelism's exchange: rank 0 sends 1 row to itself and 2 to rank
// 1; rank 1 sends none to rank 0 and 1 to itself. The gradient's rows go
// back the way they came.
TEST(TensorParallelOps, ExchangeSendsEachRanksRowsAndReturnsTheirGradients) {
  onRanks(2, [](int rank, ops::ParallelGroup& group, device::Device& dev) {
    const std::vector<std::int64_t> send = rank == 0 ? std::vector<std::int64_t>{1, 2} : std::vector<std::int64_t>{0, 1};
    const std::vector<std::int64_t> recv = rank == 0 ? std::vector<std::int64_t>{1, 0} : std::vector<std::int64_t>{2, 1};
    const std::int64_t rows = send[0] + send[1];
    std::vector<float> values;
    for (std::int64_t r = 0; r < rows; ++r) values.insert(values.end(), {10.0f * rank + r, -1.0f - r});
    Tensor x = Tensor::fromHost(dev, {rows, 2}, values);
    x.setRequiresGrad(true);
    Tape t;
    TapeScope scope(&t);
    const Tensor y = ops::exchangeRows(x, send, recv, group);
    EXPECT_EQ(y.toHost(), rank == 0 ? (std::vector<float>{0, -1}) : (std::vector<float>{1, -2, 2, -3, 10, -1}));
    std::vector<float> w(static_cast<std::size_t>(y.numel()));
    std::iota(w.begin(), w.end(), 1.0f + 100.0f * rank);
    t.backward(ops::sum(ops::mul(y, Tensor::fromHost(dev, y.shape(), w))));
    EXPECT_EQ(x.grad().toHost(), rank == 0 ? (std::vector<float>{1, 2, 101, 102, 103, 104})
                                           : (std::vector<float>{105, 106}));
  });
}

// The sum over the group, plus the bias once; a temporary partial with no
// backward to record is summed in its own memory, one that is held elsewhere
// is left intact.
TEST(TensorParallelOps, ReduceSumsInTheMemoryOfATemporaryPartialOnly) {
  onRanks(2, [](int rank, ops::ParallelGroup& group, device::Device& dev) {
    const auto partial = [&] {
      return Tensor::fromHost(dev, {2, 2}, std::vector<float>{1.0f + rank, 2.0f, 3.0f, 4.0f * rank});
    };
    const Tensor bias = Tensor::fromHost(dev, {2}, std::vector<float>{10, 20});
    const std::vector<float> expected{13, 24, 16, 24};

    Tensor temporary = partial();
    const device::Buffer* memory = temporary.storage().get();
    const Tensor y = ops::reduceFromParallel(std::move(temporary), group, bias);
    EXPECT_EQ(y.toHost(), expected);
    EXPECT_EQ(y.storage().get(), memory);

    const Tensor held = partial();
    const std::vector<float> held_values = held.toHost();
    const Tensor y2 = ops::reduceFromParallel(held, group, bias);
    EXPECT_EQ(y2.toHost(), expected);
    EXPECT_NE(y2.storage().get(), held.storage().get());
    EXPECT_EQ(held.toHost(), held_values);
  });
}

TEST(TensorParallelOps, DropoutOnPartOfASequenceDrawsThatPartOfTheWholeMask) {
  const std::vector<float> values = normals(2 * 6 * 3, 9);
  const Tensor whole = Tensor::fromHost(deviceOf(0), {2, 6, 3}, values);
  Generator rng(21);
  const std::vector<float> want = ops::dropout(whole, 0.5f, true, rng).toHost();
  for (std::int64_t first : {0, 2, 4}) {
    std::vector<float> part;
    for (std::int64_t b = 0; b < 2; ++b)
      part.insert(part.end(), values.begin() + (b * 6 + first) * 3, values.begin() + (b * 6 + first + 2) * 3);
    Generator same(21);
    const std::vector<float> got =
        ops::dropout(Tensor::fromHost(deviceOf(0), {2, 2, 3}, part), 0.5f, true, same, {first, 6}).toHost();
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t i = 0; i < 6; ++i)
        EXPECT_EQ(got[static_cast<std::size_t>(b * 6 + i)], want[static_cast<std::size_t>((b * 6 + first) * 3 + i)])
            << "positions from " << first;
  }
  EXPECT_GT(std::count(want.begin(), want.end(), 0.0f), 6) << "half dropped";
}

// The whole module's output, x's gradient and parameter gradients for
// sum(y * w), w fixed normal draws; built with `group` (or none) from seed 11.
struct Outcome {
  std::vector<float> y, dx;
  std::map<std::string, std::vector<float>> weights, grads;
  std::map<std::string, Shard> shards;
};

template <class Build>
Outcome runModule(device::Device& dev, ops::ParallelGroup* group, const Shape& in, const Build& build) {
  Generator init(11), dropout(12);
  nn::InitContext ctx{dev, init, dropout};
  ctx.tensor_parallel = group;
  std::shared_ptr<nn::Module> m = build(ctx);
  Tensor x = Tensor::fromHost(dev, in, normals(static_cast<std::size_t>(in.numel()), 13));
  x.setRequiresGrad(true);
  Outcome out;
  for (const auto& p : m->namedParameters()) {
    out.weights[p.name] = p.tensor.toHost();
    out.shards[p.name] = p.shard;
  }
  Tape tape;
  TapeScope scope(&tape);
  const Tensor y = (*m)(x);
  out.y = y.toHost();
  tape.backward(ops::sum(ops::mul(y, Tensor::fromHost(dev, y.shape(), normals(static_cast<std::size_t>(y.numel()), 14)))));
  out.dx = x.grad().toHost();
  for (const auto& p : m->namedParameters()) out.grads[p.name] = p.tensor.grad().toHost();
  return out;
}

// Every rank's parameters and their gradients are its pieces of the whole's.
void expectPiecesOfWhole(const Outcome& rank, const Outcome& whole, const std::map<std::string, Shape>& local) {
  for (const auto& [name, shard] : rank.shards) {
    std::vector<float> w(rank.weights.at(name).size()), g(w.size());
    shard.take(local.at(name), whole.weights.at(name), w);
    shard.take(local.at(name), whole.grads.at(name), g);
    expectNear(rank.weights.at(name), w, 0.0, name + " (initial value)");
    expectNear(rank.grads.at(name), g, 1e-5, name + "'s gradient");
  }
}

// A column-parallel then a row-parallel Linear with biases: Megatron's MLP.
class SplitMlp final : public nn::Module {
 public:
  explicit SplitMlp(nn::InitContext& ctx) : tp_(ctx.tensor_parallel) {
    up = registerChild("up", std::make_shared<nn::Linear>(ctx, 6, 8, true, nn::splitAcross(tp_, nn::ParallelSplit::kColumn)));
    down = registerChild("down", std::make_shared<nn::Linear>(ctx, 8, 6, true, nn::splitAcross(tp_, nn::ParallelSplit::kRow)));
  }
  std::string typeName() const override { return "SplitMlp"; }
  Tensor forward(const Tensor& input) override {
    const Tensor x = tp_ ? ops::copyToParallel(input, *tp_) : input;
    return down(ops::gelu(up(x), true));
  }
  nn::Child<nn::Linear> up, down;

 private:
  ops::ParallelGroup* tp_;
};

std::map<std::string, Shape> localShapes(const nn::Module& m) {
  std::map<std::string, Shape> out;
  for (const auto& p : m.namedParameters()) out.emplace(p.name, p.tensor.shape());
  return out;
}

TEST(TensorParallelLayers, ColumnThenRowParallelLinearIsTheWholeMlp) {
  const Shape in{3, 6};
  const Outcome whole = runModule(deviceOf(0), nullptr, in, [](nn::InitContext& c) { return std::make_shared<SplitMlp>(c); });
  onRanks(2, [&](int, ops::ParallelGroup& group, device::Device& dev) {
    std::map<std::string, Shape> local;
    const Outcome mine = runModule(dev, &group, in, [&](nn::InitContext& c) {
      auto m = std::make_shared<SplitMlp>(c);
      local = localShapes(*m);
      return m;
    });
    EXPECT_EQ(local.at("up.weight"), (Shape{4, 6}));
    EXPECT_EQ(local.at("down.weight"), (Shape{6, 4}));
    EXPECT_EQ(local.at("down.bias"), (Shape{6}));
    expectNear(mine.y, whole.y, 1e-6, "y");
    expectNear(mine.dx, whole.dx, 1e-6, "x's gradient");
    expectPiecesOfWhole(mine, whole, local);
  });
}

// An Embedding of `vocab` rows x 3 (seed 11) looking up `ids` as [2, n / 2]:
// its output, its initial weight and its gradient for sum(y * w), its shard
// and local shape.
struct Lookup {
  std::vector<float> y, weight, grad;
  Shard shard;
  Shape local;
};
Lookup lookUp(device::Device& dev, std::int64_t vocab, std::optional<std::int64_t> padding_idx,
              nn::VocabularyRows rows, const std::vector<std::int64_t>& ids) {
  Generator init(11), dropout(12);
  nn::InitContext ctx{dev, init, dropout};
  nn::Embedding e(ctx, vocab, 3, padding_idx, 1.0f, rows);
  Tape tape;
  TapeScope scope(&tape);
  const auto n = static_cast<std::int64_t>(ids.size());
  const Tensor y = e(Tensor::fromHost(dev, {2, n / 2}, ids));
  tape.backward(ops::sum(ops::mul(y, Tensor::fromHost(dev, y.shape(), normals(static_cast<std::size_t>(3 * n), 14)))));
  return {y.toHost(), e.weight.toHost(), e.weight.grad().toHost(), e.ownParameters().front().shard, e.weight.shape()};
}

// A rank's lookup is the whole table's, its rows the whole's (initial values
// and gradients), its padding rows zero.
void expectPieceOfWholeLookup(const Lookup& mine, const Lookup& whole) {
  expectNear(mine.y, whole.y, 1e-6, "lookup");
  std::vector<float> piece(mine.weight.size(), 0.0f);
  mine.shard.take(mine.local, whole.weight, piece);
  expectNear(mine.weight, piece, 0.0, "initial rows");
  std::fill(piece.begin(), piece.end(), 0.0f);
  mine.shard.take(mine.local, whole.grad, piece);
  expectNear(mine.grad, piece, 1e-6, "rows' gradient");
}

TEST(TensorParallelLayers, VocabularyParallelEmbeddingIsTheWholeLookup) {
  const std::vector<std::int64_t> ids{0, 5, 7, 2, 5, 3};  // the padding row 5 in rank 1's half
  const Lookup whole = lookUp(deviceOf(0), 8, 5, {}, ids);
  onRanks(2, [&](int rank, ops::ParallelGroup& group, device::Device& dev) {
    const Lookup mine = lookUp(dev, 8, 5, {&group}, ids);
    EXPECT_EQ(mine.local, (Shape{4, 3}));
    EXPECT_EQ(mine.shard.index, rank);
    expectPieceOfWholeLookup(mine, whole);
  });
}

// A vocabulary of 7 tokens on 2 ranks, padded to 8 (multiple 4): each rank
// draws the whole table's values for its real rows and holds zero in its
// padding row, which no lookup reaches and no gradient changes.
TEST(TensorParallelLayers, PaddedVocabularyParallelEmbeddingIsTheWholeLookup) {
  const std::vector<std::int64_t> ids{0, 6, 3, 4};
  const Lookup whole = lookUp(deviceOf(0), 7, std::nullopt, {}, ids);
  EXPECT_FALSE(whole.shard.split());
  onRanks(2, [&](int, ops::ParallelGroup& group, device::Device& dev) {
    const Lookup mine = lookUp(dev, 7, std::nullopt, {&group, 4}, ids);
    EXPECT_EQ(mine.local, (Shape{4, 3}));
    EXPECT_EQ(mine.shard.padding, 1);
    expectPieceOfWholeLookup(mine, whole);
  });
}

TEST(TensorParallelLayers, GroupedQueryAttentionOnMoreRanksThanKeyValueHeads) {
  // 4 query heads, 2 key/value heads, rotary embeddings, on 4 ranks: each
  // rank one query head; each key/value head on 2 ranks, which sum its
  // projections' gradients, so each holds the whole gradient of its piece.
  const Shape in{2, 5, 16};
  const auto build = [](nn::InitContext& c) {
    return std::make_shared<nn::SelfAttention>(
        c, nn::SelfAttentionOptions{.hidden_size = 16, .num_heads = 4, .num_key_value_heads = 2, .rope_theta = 10000.0f,
                                    .tensor_parallel = c.tensor_parallel});
  };
  const Outcome whole = runModule(deviceOf(0), nullptr, in, build);
  onRanks(4, [&](int rank, ops::ParallelGroup& group, device::Device& dev) {
    std::map<std::string, Shape> local;
    const Outcome mine = runModule(dev, &group, in, [&](nn::InitContext& c) {
      auto m = build(c);
      local = localShapes(*m);
      return m;
    });
    EXPECT_EQ(local.at("q_proj.weight"), (Shape{4, 16}));
    EXPECT_EQ(local.at("k_proj.weight"), (Shape{4, 16}));
    EXPECT_EQ(mine.shards.at("k_proj.weight").parts, 2);
    EXPECT_EQ(mine.shards.at("k_proj.weight").index, rank / 2);
    expectNear(mine.y, whole.y, 1e-5, "y");
    expectNear(mine.dx, whole.dx, 1e-5, "x's gradient");
    expectPiecesOfWhole(mine, whole, local);
  });
}

}  // namespace
}  // namespace hpu::core::testing
