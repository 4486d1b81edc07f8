// The transformer ops and the Llama / GPT-2 models against PyTorch, forward
// and backward, in float32: fixtures/transformer_torch.json, written by
// fixtures/gen_transformer_fixture.py (Hugging Face's math in plain torch).
// Every value must agree to 1e-5 (relative above magnitude 1).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "hpu/core/module/lightning_module.h"
#include "hpu/core/ops/ops.h"
#include "hpu/core/tensor/autograd.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using nlohmann::json;
using testing::testDevice;

const json& fixture() {
  static const json j = [] {
    std::ifstream in(std::string(HPU_SOURCE_DIR) + "/tests/core/fixtures/transformer_torch.json");
    return json::parse(in);
  }();
  return j;
}

Shape shapeOf(const json& t) {
  return Shape(std::span<const std::int64_t>(t["shape"].get<std::vector<std::int64_t>>()));
}

Tensor tensorFrom(const json& t) {
  if (t.contains("ints")) return Tensor::fromHost(testDevice(), shapeOf(t), t["ints"].get<std::vector<std::int64_t>>());
  return Tensor::fromHost(testDevice(), shapeOf(t), t["data"].get<std::vector<float>>());
}

// Every element within 1e-5 (relative above 1); reports the first few that are not.
void expectClose(const Tensor& got, const json& want, const std::string& what) {
  ASSERT_EQ(got.shape(), shapeOf(want)) << what;
  const std::vector<float> values = got.toHost();
  const auto ref = want["data"].get<std::vector<float>>();
  int bad = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double tol = 1e-5 * std::max(1.0, std::abs(static_cast<double>(ref[i])));
    if (std::abs(values[i] - ref[i]) > tol && ++bad <= 3)
      ADD_FAILURE() << what << " element " << i << ": " << values[i] << " vs torch " << ref[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << values.size() << " elements differ";
}

using Op = std::function<Tensor(const std::vector<Tensor>& inputs, const std::vector<Tensor>& consts)>;

// Runs `op` on the case's inputs and checks its output and the gradients of
// sum(weight * output) (or of the output, a scalar loss).
void checkCase(const std::string& name, const Op& op) {
  SCOPED_TRACE(name);
  const json& c = fixture()["ops"][name];
  std::vector<Tensor> inputs, consts;
  for (const json& t : c["inputs"]) {
    inputs.push_back(tensorFrom(t));
    inputs.back().setRequiresGrad(true);
  }
  for (const json& t : c["consts"]) consts.push_back(tensorFrom(t));
  autograd::Tape tape;
  {
    autograd::TapeScope scope(&tape);
    const Tensor out = op(inputs, consts);
    expectClose(out, c["output"], "output");
    tape.backward(c["weight"].is_null() ? out : ops::sum(ops::mul(out, tensorFrom(c["weight"]))));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)
    expectClose(inputs[i].grad(), c["grads"][i], "gradient " + std::to_string(i));
}

TEST(TorchFixture, ProductsAndLayouts) {
  checkCase("matmul_transposes", [](const auto& in, const auto&) {
    return ops::matmul(in[0], in[1], {.transpose_a = true, .transpose_b = true});
  });
  checkCase("permute", [](const auto& in, const auto&) { return ops::permute(in[0], {0, 2, 3, 1}); });
  checkCase("split_heads", [](const auto& in, const auto&) { return ops::splitHeads(in[0], 3); });
  checkCase("merge_heads", [](const auto& in, const auto&) { return ops::mergeHeads(in[0]); });
}

TEST(TorchFixture, Attention) {
  const auto attend = [](ops::AttentionOptions o) {
    return [o](const auto& in, const auto&) { return ops::scaledDotProductAttention(in[0], in[1], in[2], o); };
  };
  checkCase("attention_causal", attend({}));
  checkCase("attention_grouped_query", attend({}));
  checkCase("attention_cached_prefix", attend({}));
  checkCase("attention_sliding_window", attend({.sliding_window = 3}));
}

TEST(TorchFixture, NormsPositionsActivationsEmbeddingAndLosses) {
  checkCase("rms_norm", [](const auto& in, const auto&) { return ops::rmsNorm(in[0], in[1], 1e-6f); });
  checkCase("rotary", [](const auto& in, const auto& c) { return ops::rotaryEmbedding(in[0], c[0], 10000.0f); });
  checkCase("rotary_llama3_scaling", [](const auto& in, const auto& c) {
    const ops::RopeScaling llama3{.type = ops::RopeScaling::Type::kLlama3,
                                  .factor = 8.0f,
                                  .low_freq_factor = 1.0f,
                                  .high_freq_factor = 4.0f,
                                  .original_max_position_embeddings = 8192};
    return ops::rotaryEmbedding(in[0], c[0], 500000.0f, llama3);
  });
  checkCase("silu", [](const auto& in, const auto&) { return ops::silu(in[0]); });
  checkCase("swiglu", [](const auto& in, const auto&) { return ops::swiglu(in[0], in[1]); });
  checkCase("embedding_padding", [](const auto& in, const auto& c) { return ops::embedding(c[0], in[0], 2); });
  checkCase("cross_entropy_ignore",
            [](const auto& in, const auto& c) { return ops::crossEntropy(in[0], c[0], ops::CrossEntropyOptions{}); });
  checkCase("cross_entropy_smoothing", [](const auto& in, const auto& c) {
    return ops::crossEntropy(in[0], c[0], ops::CrossEntropyOptions{.label_smoothing = 0.1f});
  });
}

// A model built from the fixture's config with its weights, by Hugging Face
// name: logits, the loss over its labels, and every weight's gradient.
void checkModel(const std::string& family, const std::string& class_name) {
  const json& f = fixture()[family];
  std::string yaml = "class_path: " + class_name + "\ninit_args:\n";
  for (const auto& [key, value] : f["config"].items()) yaml += "  " + key + ": " + value.dump() + "\n";
  auto model = testing::buildComponent<LightningModule>(config::ComponentKind::kModel, yaml, "model");
  Generator init(1), dropout(2);
  nn::InitContext ctx{testDevice(), init, dropout};
  model->configureModel(ctx, {});
  std::map<std::string, Tensor> params;
  for (const nn::NamedTensor& p : model->namedParameters()) params[p.name] = p.tensor;
  std::vector<std::string> names;
  for (const auto& [name, w] : f["weights"].items()) {
    names.push_back(name);
    ASSERT_TRUE(params.count(name)) << class_name << " has no parameter " << name;
    std::vector<float> values = w["data"].get<std::vector<float>>();
    ASSERT_EQ(params[name].shape(), shapeOf(w)) << name;
    std::copy(values.begin(), values.end(), params[name].data());
  }
  EXPECT_EQ(params.size(), names.size()) << "the model has parameters torch's has not";
  model->eval();
  autograd::Tape tape;
  {
    autograd::TapeScope scope(&tape);
    const Tensor logits = (*model)(nn::Inputs{{{"input_ids", tensorFrom(f["input_ids"])}}});
    expectClose(logits, f["logits"], "logits");
    const Tensor loss = ops::crossEntropy(logits, tensorFrom(f["labels"]), ops::CrossEntropyOptions{});
    EXPECT_NEAR(loss.item(), f["loss"].get<double>(), 1e-5);
    tape.backward(loss);
  }
  for (const std::string& name : names) expectClose(params[name].grad(), f["grads"][name], "gradient of " + name);
}

TEST(TorchFixture, LlamaLogitsLossAndGradientsAreHuggingFacesUnderItsNames) { checkModel("llama", "LlamaForCausalLM"); }

TEST(TorchFixture, Gpt2LogitsLossAndGradientsAreHuggingFacesUnderItsNames) { checkModel("gpt2", "GPT2LMHeadModel"); }

}  // namespace
}  // namespace hpu::core
