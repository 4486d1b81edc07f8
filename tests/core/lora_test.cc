// LoRA: PEFT's trainable counts, a model that starts at its base and merges
// to its own outputs, gradients against finite differences, frozen weights
// outside the gradient buckets, and adapters that round-trip through PEFT's
// layout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "hpu/core/base/file_io.h"
#include "hpu/core/checkpoint/safetensors_file.h"
#include "hpu/core/models/causal_lm.h"
#include "hpu/core/models/hf_directory.h"
#include "hpu/core/nn/flat_parameters.h"
#include "hpu/core/nn/lora.h"
#include "hpu/core/tensor/autograd.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using testing::errorOf;
using testing::TempDir;
using testing::testDevice;

// A small language model on the test device.
template <class... Args>
std::unique_ptr<models::CausalLM> lm(Args&&... args) {
  return testing::configuredModel<models::CausalLM>(std::forward<Args>(args)...);
}

const char* kTiny =
    "vocab_size: 40, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
    "num_key_value_heads: 2, max_position_embeddings: 64";

std::int64_t trainable(const nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.namedParameters())
    if (p.tensor.requiresGrad()) n += p.tensor.numel();
  return n;
}

Tensor ids() { return Tensor::fromHost(testDevice(), {2, 5}, std::vector<std::int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}); }

std::vector<float> logitsOf(models::CausalLM& m) {
  autograd::TapeScope no_grad(nullptr);
  m.eval();
  return m(nn::Inputs{{{"input_ids", ids()}}}).toHost();
}

// Gives every lora_B a nonzero value, as training would.
void perturbAdapters(nn::Module& m) {
  Generator g(17);
  for (const auto& p : m.namedParameters())
    if (p.name.find("lora_B") != std::string::npos)
      for (float& v : Tensor(p.tensor).values()) v = 0.1f * static_cast<float>(g.normal());
}

TEST(Lora, TrainableCountIsPeftsOnLlama2_7B) {
  static device::Device dev(0, 0, device::Generation::kGaudi2,
                            device::DeviceOptions{{96ull << 30, "gaudi2's 96 GiB of HBM"},
                                                  device::ExecutionMode::kLazy, nullptr, /*shapeOnly=*/true});
  // Llama-2-7B's architecture; PEFT's print_trainable_parameters says
  // "trainable params: 4,194,304 || all params: 6,742,609,920".
  auto model = lm("LlamaForCausalLM",
                     "{vocab_size: 32000, hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 32, "
                     "num_attention_heads: 32, max_position_embeddings: 4096, lora: {r: 8, target_modules: [q_proj, "
                     "v_proj]}}",
                     1, dev);
  EXPECT_EQ(trainable(*model), 4'194'304);
  EXPECT_EQ(model->numParameters(), 6'742'609'920);
}

TEST(Lora, StartsAtTheBaseModelAndMergesToItsOwnOutputs) {
  auto base = lm("LlamaForCausalLM", std::string("{") + kTiny + "}", 5);
  auto lora = lm("LlamaForCausalLM", std::string("{") + kTiny + ", lora: {r: 4, lora_alpha: 8, bias: all}}", 5);
  EXPECT_EQ(logitsOf(*base), logitsOf(*lora));  // B = 0
  perturbAdapters(*lora);
  const std::vector<float> adapted = logitsOf(*lora);
  EXPECT_NE(adapted, logitsOf(*base));
  // The base model with the merged weights of q_proj and v_proj (2 layers each) computes the adapted outputs.
  const std::map<std::string, const nn::LoraLinear*> layers = nn::loraLayers(*lora);
  EXPECT_EQ(layers.size(), 4u);
  for (const auto& p : base->namedParameters())
    if (const auto it = layers.find(p.name); it != layers.end()) {
      const std::vector<float> w = it->second->mergedWeight();
      std::copy(w.begin(), w.end(), Tensor(p.tensor).values().begin());
    }
  const std::vector<float> merged = logitsOf(*base);
  for (std::size_t i = 0; i < merged.size(); ++i) EXPECT_NEAR(merged[i], adapted[i], 1e-5) << i;
}

TEST(Lora, ExportingWritesTheMergedModelAndLeavesTheAdaptedOneAsItWas) {
  TempDir dir;
  auto model = lm("LlamaForCausalLM", std::string("{") + kTiny + ", lora: {r: 4, lora_alpha: 16}}", 5);
  perturbAdapters(*model);
  const std::vector<float> logits = logitsOf(*model);
  models::GenerationOptions greedy;
  greedy.max_new_tokens = 6;
  Generator rng(3);
  const std::vector<std::int64_t> tokens = model->generate({3, 1, 4}, greedy, rng);
  model->saveAdapter(dir.file("adapter_before"));
  model->exportPretrained(dir.file("first"));
  model->exportPretrained(dir.file("second"));
  EXPECT_EQ(readFile(dir.file("second/model.safetensors")), readFile(dir.file("first/model.safetensors")));
  // Predicting after the export: the adapted model's outputs, bit for bit, and its adapters.
  EXPECT_EQ(logitsOf(*model), logits);
  EXPECT_EQ(model->generate({3, 1, 4}, greedy, rng), tokens);
  model->saveAdapter(dir.file("adapter_after"));
  EXPECT_EQ(readFile(dir.file("adapter_after/adapter_model.safetensors")),
            readFile(dir.file("adapter_before/adapter_model.safetensors")));
  // The export holds the merged weights: loaded as a plain model, the adapted outputs.
  auto merged = lm("LlamaForCausalLM", "{pretrained: " + dir.file("first") + "}", 99);
  const std::vector<float> merged_logits = logitsOf(*merged);
  ASSERT_EQ(merged_logits.size(), logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(merged_logits[i], logits[i], 1e-5) << i;
}

TEST(Lora, GradientsOfTheAdaptersMatchFiniteDifferences) {
  auto model = lm("LlamaForCausalLM", std::string("{") + kTiny + ", lora: {r: 2, lora_alpha: 3}}", 5);
  perturbAdapters(*model);
  model->train();
  const Tensor labels = Tensor::fromHost(testDevice(), {2, 5}, std::vector<std::int64_t>{1, 4, 1, 5, 9, 2, 6, 5, 3, 5});
  const auto loss = [&] {
    return ops::crossEntropy((*model)(nn::Inputs{{{"input_ids", ids()}}}), labels, ops::CrossEntropyOptions{});
  };
  autograd::Tape tape;
  {
    autograd::TapeScope scope(&tape);
    tape.backward(loss());
  }
  autograd::TapeScope no_grad(nullptr);
  int checked = 0;
  for (const auto& p : model->namedParameters()) {
    if (!p.tensor.requiresGrad()) {
      EXPECT_FALSE(p.tensor.grad().defined()) << p.name << " is frozen";
      continue;
    }
    const std::vector<float> grad = p.tensor.grad().toHost();
    std::span<float> v = Tensor(p.tensor).values();
    for (std::size_t i = 0; i < v.size(); i += 7) {
      const float x = v[i], h = 1e-2f;
      v[i] = x + h;
      const double up = loss().item();
      v[i] = x - h;
      const double down = loss().item();
      v[i] = x;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(grad[i], numeric, 2e-3 + 1e-2 * std::abs(numeric)) << p.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(Lora, FrozenWeightsStayOutOfTheGradientBuckets) {
  auto model = lm("LlamaForCausalLM", std::string("{") + kTiny + ", lora: {r: 4}}", 5);
  nn::FlatParameters flat(*model, testDevice(), 25 << 20);
  EXPECT_EQ(flat.numel(), trainable(*model));
  EXPECT_EQ(flat.numel(), 2 * (4 * 32 + 32 * 4) + 2 * (4 * 32 + 16 * 4));  // q_proj [32, 32], v_proj [16, 32]
  std::int64_t frozen = 0;
  for (const auto& p : flat.frozen()) frozen += p.tensor.numel();
  EXPECT_EQ(frozen + flat.numel(), model->numParameters());
}

TEST(Lora, TargetsAndBiasesFollowPeftsRules) {
  auto gpt2 = lm("GPT2LMHeadModel", "{vocab_size: 40, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 64, "
                                       "lora: {r: 4, bias: lora_only, modules_to_save: [ln_f]}}", 5);
  // PEFT's default for gpt2 adapts c_attn (Conv1D [32, 96]); lora_only trains
  // its bias; modules_to_save trains ln_f whole.
  EXPECT_EQ(trainable(*gpt2), 2 * (4 * 32 + 96 * 4 + 96) + 2 * 32);
  auto regex = lm("LlamaForCausalLM", std::string("{") + kTiny +
                                             ", lora: {r: 1, target_modules: 'model\\.layers\\.1\\..*_proj'}}", 5);
  EXPECT_EQ(trainable(*regex), (6 * 32 + 48) + (32 + 16 + 16 + 32 + 48 + 48 + 32));  // A: 7 x [1, in]; B: 7 x [out, 1]
  EXPECT_EQ(errorOf<UsageError>([&] {
              lm("LlamaForCausalLM", std::string("{") + kTiny + ", lora: {target_modules: [qproj]}}", 5);
            }),
            "model.init_args.lora.target_modules: [qproj] matches no layer of the model");
  EXPECT_EQ(errorOf<UsageError>([&] {
              lm("LlamaForCausalLM", std::string("{") + kTiny + ", lora: {target_modules: [norm]}}", 5);
            }),
            "model.init_args.lora.target_modules names model.norm, a RMSNorm; LoRA adapts Linear and Conv1D layers");
}

TEST(Lora, AdaptersRoundTripThroughPeftsLayout) {
  TempDir dir;
  auto trained = lm("LlamaForCausalLM", std::string("{") + kTiny + ", lora: {r: 4, lora_alpha: 16}}", 5);
  perturbAdapters(*trained);
  trained->saveAdapter(dir.file("adapter"));
  EXPECT_THAT(TempDir::entriesOf(dir.file("adapter")),
              ::testing::ElementsAre("adapter_config.json", "adapter_model.safetensors"));
  const auto file = checkpoint::SafetensorsFile::open(dir.file("adapter/adapter_model.safetensors"));
  EXPECT_EQ(file->tensors().size(), 8u);
  EXPECT_NE(file->find("base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"), nullptr);
  // The same base (seed 5), the adapter from its files: its LoraConfig too.
  auto loaded = lm("LlamaForCausalLM", std::string("{") + kTiny + ", lora_path: " + dir.file("adapter") + "}", 5);
  EXPECT_EQ(logitsOf(*trained), logitsOf(*loaded));
  EXPECT_EQ(errorOf<UsageError>([&] { lm("LlamaForCausalLM", std::string("{") + kTiny + "}", 5)->saveAdapter(dir.file("x")); }),
            "export --adapter: the checkpoint's model has no LoRA adapters (model.init_args.lora is null)");
}

}  // namespace
}  // namespace hpu::core
