// The YAML layers a transformer is written with: layout, heads, rotary
// embeddings, self-attention, residual blocks and activations compute their
// ops, refuse inputs that do not fit by name, and compose into a Sequential
// language model equal to LlamaForCausalLM with the same weights.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "hpu/core/data/dataset.h"
#include "hpu/core/data/tokenizer.h"
#include "hpu/core/module/lightning_module.h"
#include "hpu/core/nn/layer.h"
#include "hpu/core/nn/layers/rotary.h"
#include "hpu/core/nn/layers/self_attention.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using testing::errorOf;
using ::testing::HasSubstr;
using testing::randomTensor;
using testing::testDevice;

struct Built {
  nn::LayerBuild layer;
  Tensor out;
};

// Builds one layer from YAML for samples `in` and runs it on x.
Built runLayer(const std::string& yaml, const Tensor& x) {
  auto recipe = testing::buildComponent<nn::LayerRecipe>(config::ComponentKind::kLayer, yaml, "layers[0]");
  Generator init(1), dropout(2);
  nn::InitContext ctx{testDevice(), init, dropout};
  const std::vector<std::int64_t> sample(x.shape().dims().begin() + 1, x.shape().dims().end());
  nn::LayerBuild built = recipe->build(ctx, Shape(std::span<const std::int64_t>(sample)), "layers[0]");
  Tensor out = (*built.module)(x);
  return {std::move(built), out};
}

std::string misfit(const std::string& yaml, const Shape& sample) {
  return errorOf<UsageError>([&] {
    auto recipe = testing::buildComponent<nn::LayerRecipe>(config::ComponentKind::kLayer, yaml, "layers[0]");
    Generator init(1), dropout(2);
    nn::InitContext ctx{testDevice(), init, dropout};
    recipe->build(ctx, sample, "layers[0]");
  });
}

void expectSame(const Tensor& got, const Tensor& want, float tol = 0.0f) {
  ASSERT_EQ(got.shape(), want.shape()) << got.shape().str() << " vs " << want.shape().str();
  const std::vector<float> g = got.toHost(), w = want.toHost();
  for (std::size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol * (1.0f + std::abs(w[i]))) << "at " << i;
}

TEST(Layers, LayoutLayersMoveDimensionsAndKeepTheBatchFirst) {
  Generator g(7);
  const Tensor x = randomTensor({2, 3, 4, 5}, g);
  const Built t = runLayer("{class_path: Transpose, init_args: {dim0: 1, dim1: -1}}", x);
  EXPECT_EQ(t.layer.out, (Shape{5, 4, 3}));
  expectSame(t.out, ops::transpose(x, 1, 3));
  const Built p = runLayer("{class_path: Permute, init_args: {dims: [0, 2, 3, 1]}}", x);
  EXPECT_EQ(p.layer.out, (Shape{4, 5, 3}));
  expectSame(p.out, ops::permute(x, {0, 2, 3, 1}));
  const Built r = runLayer("{class_path: Reshape, init_args: {shape: [-1, 5]}}", x);
  EXPECT_EQ(r.layer.out, (Shape{12, 5}));
  expectSame(r.out, ops::reshape(x, {2, 12, 5}));

  EXPECT_EQ(misfit("{class_path: Transpose, init_args: {dim0: 0, dim1: 2}}", {3, 4, 5}),
            "layers[0]: dimension 0 is the batch, which stays first for a [batch, 3, 4, 5] input; give 1 .. 3 "
            "(or -1 .. -3)");
  EXPECT_EQ(misfit("{class_path: Transpose, init_args: {dim0: 1, dim1: 4}}", {3, 4, 5}),
            "layers[0]: dimension 4 is out of range for a [batch, 3, 4, 5] input; give 1 .. 3 (or -1 .. -3)");
  EXPECT_EQ(misfit("{class_path: Permute, init_args: {dims: [0, 1, 1, 2]}}", {3, 4, 5}),
            "layers[0]: Permute: dims [0, 1, 1, 2] repeat dimension 1");
  EXPECT_EQ(misfit("{class_path: Permute, init_args: {dims: [1, 0, 2, 3]}}", {3, 4, 5}),
            "layers[0]: Permute: dims [1, 0, 2, 3] must list all 4 dimensions of a [batch, 3, 4, 5] input, 0 first");
  EXPECT_EQ(misfit("{class_path: Reshape, init_args: {shape: [7, -1]}}", {3, 4, 5}),
            "layers[0]: Reshape: a [3, 4, 5] sample (60 values) cannot be shaped [7, -1]");
  EXPECT_EQ(misfit("{class_path: Reshape, init_args: {shape: [-1, -1]}}", {3, 4, 5}),
            "layers[0]: Reshape: more than one dimension is -1");
}

TEST(Layers, ActivationLayersComputeTheirOps) {
  Generator g(3);
  const Tensor x = randomTensor({4, 6}, g);
  expectSame(runLayer("ReLU", x).out, ops::relu(x));
  expectSame(runLayer("GELU", x).out, ops::gelu(x, false));
  expectSame(runLayer("{class_path: GELU, init_args: {approximate: tanh}}", x).out, ops::gelu(x, true));
  expectSame(runLayer("Tanh", x).out, ops::tanh(x));
  expectSame(runLayer("Sigmoid", x).out, ops::sigmoid(x));
  expectSame(runLayer("SiLU", x).out, ops::silu(x));
  const std::vector<Tensor> halves = ops::split(x, std::vector<std::int64_t>{3, 3});
  expectSame(runLayer("SwiGLU", x).out, ops::swiglu(halves[0], halves[1]));
}

TEST(Layers, HeadsAndRotaryEmbeddingAreTheirOps) {
  Generator g(5);
  const Tensor x = randomTensor({2, 4, 6}, g);
  const Built split = runLayer("{class_path: SplitHeads, init_args: {num_heads: 2}}", x);
  EXPECT_EQ(split.layer.out, (Shape{2, 4, 3}));
  expectSame(split.out, ops::splitHeads(x, 2));
  const Built merged = runLayer("MergeHeads", split.out);
  EXPECT_EQ(merged.layer.out, (Shape{4, 6}));
  expectSame(merged.out, x);
  const Tensor heads = randomTensor({2, 3, 4, 6}, g);
  expectSame(runLayer("{class_path: RotaryEmbedding, init_args: {rope_theta: 500.0}}", heads).out,
             ops::rotaryEmbedding(heads, nn::positionRange(testDevice(), 0, 4), 500.0f));

  EXPECT_EQ(misfit("{class_path: SplitHeads, init_args: {num_heads: 4}}", {4, 6}),
            "layers[0]: SplitHeads needs [tokens, features] samples with features a multiple of num_heads 4; got "
            "[4, 6]");
  EXPECT_EQ(misfit("{class_path: RotaryEmbedding}", {4, 5}),
            "layers[0]: RotaryEmbedding needs [..., tokens, head_dim] samples with an even head_dim; got [4, 5]");
  EXPECT_EQ(misfit("{class_path: SelfAttention, init_args: {num_heads: 4, num_key_value_heads: 3}}", {5, 12}),
            "layers[0]: num_heads 4 is not a multiple of num_key_value_heads 3");
  EXPECT_EQ(misfit("{class_path: Residual, init_args: {layers: [{class_path: Linear, init_args: {out_features: 3}}]}}",
                   {5, 12}),
            "layers[0]: Residual: its layers turn a [5, 12] sample into [5, 3]; x + f(x) needs the same shape");
}

TEST(Layers, SelfAttentionAttendsWithItsProjections) {
  Generator g(9);
  const Tensor x = randomTensor({2, 5, 16}, g);
  const Built a =
      runLayer("{class_path: SelfAttention, init_args: {num_heads: 4, num_key_value_heads: 2, rope_theta: 100.0}}", x);
  EXPECT_EQ(a.layer.out, (Shape{5, 16}));
  const auto& attn = static_cast<nn::SelfAttention&>(*a.layer.module);
  const Tensor positions = nn::positionRange(testDevice(), 0, 5);
  const Tensor q =
      ops::rotaryEmbedding(ops::splitHeads(ops::linear(x, attn.q_proj->weight, Tensor()), 4), positions, 100.0f);
  const Tensor k =
      ops::rotaryEmbedding(ops::splitHeads(ops::linear(x, attn.k_proj->weight, Tensor()), 2), positions, 100.0f);
  const Tensor v = ops::splitHeads(ops::linear(x, attn.v_proj->weight, Tensor()), 2);
  const Tensor want = ops::linear(ops::mergeHeads(ops::scaledDotProductAttention(q, k, v, {.causal = true})),
                                  attn.o_proj->weight, Tensor());
  expectSame(a.out, want, 1e-6f);
  EXPECT_EQ(attn.k_proj->weight.shape(), (Shape{8, 16})) << "2 key/value heads of 4";
}

// Text data of 8-token blocks over the 256 byte tokens.
ModelInput textInput() {
  static const std::shared_ptr<const data::Tokenizer> bytes = data::makeByteTokenizer();
  return {Shape{8}, 0, {{"input_ids", device::DType::kInt64, {8}}, {"labels", device::DType::kInt64, {8}}}, bytes};
}

std::unique_ptr<LightningModule> configured(const std::string& yaml, const ModelInput& input) {
  auto model = testing::buildComponent<LightningModule>(config::ComponentKind::kModel, yaml, "model");
  Generator init(1), dropout(2);
  nn::InitContext ctx{testDevice(), init, dropout};
  model->configureModel(ctx, input);
  return model;
}

// Llama's decoder written as YAML layers: pre-norm residual attention and
// SwiGLU MLP blocks (gate and up projections fused in one Linear).
constexpr const char* kSequentialLlama = R"(class_path: Sequential
init_args:
  layers:
    - {class_path: Embedding, init_args: {num_embeddings: 256, embedding_dim: 16}}
    - {class_path: Residual, init_args: {layers: [RMSNorm, {class_path: SelfAttention, init_args: {num_heads: 4, num_key_value_heads: 2, rope_theta: 10000.0}}]}}
    - {class_path: Residual, init_args: {layers: [RMSNorm, {class_path: Linear, init_args: {out_features: 48, bias: false}}, SwiGLU, {class_path: Linear, init_args: {out_features: 16, bias: false}}]}}
    - {class_path: Residual, init_args: {layers: [RMSNorm, {class_path: SelfAttention, init_args: {num_heads: 4, num_key_value_heads: 2, rope_theta: 10000.0}}]}}
    - {class_path: Residual, init_args: {layers: [RMSNorm, {class_path: Linear, init_args: {out_features: 48, bias: false}}, SwiGLU, {class_path: Linear, init_args: {out_features: 16, bias: false}}]}}
    - RMSNorm
    - {class_path: Linear, init_args: {out_features: 256, bias: false}}
)";

TEST(Layers, ASequentialLlamaIsLlamaForCausalLM) {
  const ModelInput input = textInput();
  auto llama = configured(
      "class_path: LlamaForCausalLM\ninit_args: {hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2, "
      "num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 8}",
      input);
  auto sequential = configured(kSequentialLlama, input);
  // Llama's weights into the Sequential, in order; gate_proj and up_proj stacked.
  const auto from = llama->namedParameters(), to = sequential->namedParameters();
  ASSERT_EQ(to.size() + 2, from.size()) << "one fused Linear per MLP";
  std::size_t f = 0;
  for (const nn::NamedTensor& p : to) {
    float* dst = Tensor(p.tensor).data();
    const std::int64_t want = p.tensor.numel();
    std::int64_t copied = 0;
    while (copied < want) {
      const Tensor& src = from.at(f++).tensor;
      std::copy_n(src.data(), src.numel(), dst + copied);
      copied += src.numel();
    }
    ASSERT_EQ(copied, want) << p.name;
  }
  ASSERT_EQ(f, from.size());
  Generator g(4);
  std::vector<std::int64_t> ids(16);
  for (auto& id : ids) id = static_cast<std::int64_t>(g.uniform() * 255.0f);
  const Tensor tokens = Tensor::fromHost(testDevice(), {2, 8}, ids);
  expectSame((*sequential)(tokens), (*llama)(nn::Inputs{{{"input_ids", tokens}}}), 1e-5f);
}

TEST(Layers, ASequentialOnTextMustScoreEveryTokenOfTheVocabulary) {
  const std::string yaml =
      "class_path: Sequential\ninit_args:\n  layers: [{class_path: Embedding, init_args: {num_embeddings: 256, "
      "embedding_dim: 8}}, {class_path: Linear, init_args: {out_features: 10}}]";
  EXPECT_EQ(errorOf<UsageError>([&] { configured(yaml, textInput()); }),
            "model.init_args.layers: the last layer gives [8, 10] per sample but the data needs [8, 256] (256 token "
            "scores per position); end with {class_path: Linear, init_args: {out_features: 256}}");
  EXPECT_THAT(errorOf<UsageError>([&] { configured("class_path: MLPClassifier", textInput()); }),
              HasSubstr("MLPClassifier is a classifier and the data is text; choose a language model"));
}

}  // namespace
}  // namespace hpu::core
