// The language models: Hugging Face configs and parameter counts, tied
// embeddings, activation checkpointing, and generation with a KV cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hpu/core/models/causal_lm.h"
#include "hpu/core/module/lightning_module.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/device/device.h"
#include "hpu/device/platform.h"
#include "test_support.h"

namespace hpu::core {
namespace {

using testing::errorOf;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::testDevice;

std::unique_ptr<LightningModule> buildModel(const std::string& class_name, const std::string& init_args) {
  return testing::buildComponent<LightningModule>(config::ComponentKind::kModel,
                                                  "class_path: " + class_name + "\ninit_args: " + init_args, "model");
}

// A gaudi2-sized device without storage: full-size models fit on this host.
device::Device& shapeOnlyDevice() {
  static device::Device dev(
      0, 0, device::Generation::kGaudi2,
      device::DeviceOptions{
          {96ull << 30, "gaudi2's 96 GiB of HBM"}, device::ExecutionMode::kLazy, nullptr, /*shapeOnly=*/true});
  return dev;
}

// Parameters of the model, counted on `dev` (the gaudi2-sized one unless a
// model's fp32 weights are larger: Mixtral-8x7B's 187 GB).
std::int64_t parameterCount(const std::string& class_name, const std::string& init_args,
                            device::Device& dev = shapeOnlyDevice()) {
  auto model = buildModel(class_name, init_args);
  Generator init(1), dropout(2);
  nn::InitContext ctx{dev, init, dropout};
  model->configureModel(ctx, {});
  return model->numParameters();
}

std::string writeJson(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path() / name).string();
  testing::writeBytes(path, text);
  return path;
}

TEST(LanguageModel, ParameterCountsAreHuggingFacesAtFullSize) {
  TempDir dir;
  // meta-llama/Llama-2-7b-hf's config.json.
  const std::string llama2 = writeJson(dir, "llama2.json", R"({
    "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 4096,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "tie_word_embeddings": false,
    "torch_dtype": "float16", "transformers_version": "4.31.0.dev0", "use_cache": true, "vocab_size": 32000})");
  EXPECT_EQ(parameterCount("LlamaForCausalLM", "{config: " + llama2 + "}"), 6'738'415'616);
  // Mistral-7B-v0.1: grouped-query attention (8 key/value heads), a sliding window.
  const std::string mistral = writeJson(dir, "mistral.json", R"({
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})");
  EXPECT_EQ(parameterCount("LlamaForCausalLM", "{config: " + mistral + "}"), 7'241'732'096);
  // Llama-3.1-8B: rope_scaling llama3, a 128256-token vocabulary.
  const std::string llama31 = writeJson(dir, "llama31.json", R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
    "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0",
    "use_cache": true, "vocab_size": 128256})");
  EXPECT_EQ(parameterCount("LlamaForCausalLM", "{config: " + llama31 + "}"), 8'030'261'248);
  // Qwen2-7B: biases on q, k and v, a window switched off (use_sliding_window false).
  const std::string qwen2 = writeJson(dir, "qwen2.json", R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
    "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944,
    "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 131072, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.37.2",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 152064})");
  EXPECT_EQ(parameterCount("AutoModelForCausalLM", "{config: " + qwen2 + "}"), 7'615'616'512);
  // gemma-7b: head_dim 256 with 16 heads of hidden 3072, tied embeddings, the first releases' "gelu".
  const std::string gemma = writeJson(dir, "gemma.json", R"({
    "architectures": ["GemmaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 2,
    "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu", "hidden_size": 3072, "initializer_range": 0.02,
    "intermediate_size": 24576, "max_position_embeddings": 8192, "model_type": "gemma", "num_attention_heads": 16,
    "num_hidden_layers": 28, "num_key_value_heads": 16, "pad_token_id": 0, "rms_norm_eps": 1e-06,
    "rope_scaling": null, "rope_theta": 10000.0, "torch_dtype": "bfloat16", "transformers_version": "4.38.0.dev0",
    "use_cache": true, "vocab_size": 256000})");
  EXPECT_EQ(parameterCount("AutoModelForCausalLM", "{config: " + gemma + "}"), 8'537'680'896);
  // gemma-2-9b: four norms a layer, soft-capping, sliding_window_size (an early duplicate of sliding_window).
  const std::string gemma2 = writeJson(dir, "gemma2.json", R"({
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
    "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 16,
    "num_hidden_layers": 42, "num_key_value_heads": 8, "pad_token_id": 0, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "sliding_window_size": 4096,
    "torch_dtype": "float32", "transformers_version": "4.42.0.dev0", "use_cache": true, "vocab_size": 256000})");
  EXPECT_EQ(parameterCount("AutoModelForCausalLM", "{config: " + gemma2 + "}"), 9'241'705'984);
  // Phi-3-mini-4k-instruct: fused qkv_proj and gate_up_proj, remote code named in auto_map.
  const std::string phi3 = writeJson(dir, "phi3.json", R"({
    "_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"], "attention_bias": false,
    "attention_dropout": 0.0, "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config",
    "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"}, "bos_token_id": 1, "embd_pdrop": 0.0,
    "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000,
    "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0, "sliding_window": 2047,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": true,
    "vocab_size": 32064})");
  EXPECT_EQ(parameterCount("AutoModelForCausalLM", "{config: " + phi3 + "}"), 3'821'079'552);
  // Mixtral-8x7B-v0.1: 8 experts of 14336 in every layer.
  device::Device large(0, 0, device::Generation::kGaudi2,
                       device::DeviceOptions{{256ull << 30, "a shape-only device for Mixtral's fp32 weights"},
                                             device::ExecutionMode::kLazy, nullptr, /*shapeOnly=*/true});
  EXPECT_EQ(parameterCount("AutoModelForCausalLM",
                           "{config: " + std::string(HPU_SOURCE_DIR) + "/configs/estimate/mixtral_8x7b.json}", large),
            46'702'792'704);
  // gpt2 (124M), its defaults, embeddings tied.
  EXPECT_EQ(parameterCount("GPT2LMHeadModel", "{vocab_size: 50257}"), 124'439'808);
}

TEST(LanguageModel, ConfigJsonKeysAreReadIgnoredOrRefusedByName) {
  TempDir dir;
  const std::string base = R"("model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 1,
    "num_attention_heads": 4, "vocab_size": 50)";
  // Harmless keys are ignored; init_args beside the file win.
  const std::string ok = writeJson(dir, "ok.json", "{" + base + R"(, "torch_dtype": "bfloat16", "architectures": ["X"],
    "id2label": {"0": "a"}, "use_cache": true})");
  EXPECT_EQ(parameterCount("LlamaForCausalLM", "{config: " + ok + "}"),
            parameterCount("LlamaForCausalLM",
                           "{hidden_size: 64, intermediate_size: 96, num_hidden_layers: 1, "
                           "num_attention_heads: 4, vocab_size: 50}"));
  EXPECT_EQ(parameterCount("LlamaForCausalLM", "{config: " + ok + ", num_hidden_layers: 2}"),
            parameterCount("LlamaForCausalLM",
                           "{hidden_size: 64, intermediate_size: 96, num_hidden_layers: 2, "
                           "num_attention_heads: 4, vocab_size: 50}"));
  const auto refusal = [&](const std::string& name, const std::string& extra) {
    const std::string path = writeJson(dir, name, "{" + base + ", " + extra + "}");
    return errorOf<UsageError>([&] { buildModel("LlamaForCausalLM", "{config: " + path + "}"); });
  };
  EXPECT_EQ(refusal("scaling.json", R"("rope_scaling": {"type": "dynamic", "factor": 2.0})"),
            (dir.path() / "scaling.json").string() +
                R"(: rope_scaling: {"factor":2.0,"type":"dynamic"}: rope_type 'dynamic' is not implemented )"
                "(default, linear, llama3)");
  EXPECT_EQ(refusal("factor.json", R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0})"),
            (dir.path() / "factor.json").string() +
                R"(: rope_scaling: {"factor":8.0,"rope_type":"llama3"}: no low_freq_factor)");
  EXPECT_EQ(refusal("act.json", R"("hidden_act": "quick_gelu")"),
            (dir.path() / "act.json").string() +
                ": hidden_act: 'quick_gelu' is not implemented: the gated MLP computes silu, gelu or gelu_pytorch_tanh");
  EXPECT_THAT(refusal("unknown.json", R"("num_experts": 8)"),
              HasSubstr("unknown.json: num_experts: is not a LlamaConfig / MistralConfig key hpu-train implements"));
  std::string gpt2 = base;
  gpt2.replace(gpt2.find("llama"), 5, "gpt2");
  const std::string type = writeJson(dir, "type.json", "{" + gpt2 + "}");
  EXPECT_EQ(errorOf<UsageError>([&] { buildModel("LlamaForCausalLM", "{config: " + type + "}"); }),
            type + ": model_type: 'gpt2' is not llama or mistral: LlamaForCausalLM builds those");
}

// A small model on the test device, weights from the seed.
std::unique_ptr<models::CausalLM> small(const std::string& class_name, const std::string& init_args,
                                        std::uint64_t seed = 5, device::Device& dev = testDevice()) {
  return testing::configuredModel<models::CausalLM>(class_name, init_args, seed, dev);
}

const char* kTinyLlama =
    "{vocab_size: 40, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
    "num_key_value_heads: 2, max_position_embeddings: 64}";
const char* kTinyGpt2 = "{vocab_size: 40, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 64}";

TEST(LanguageModel, ConfigJsonOfEitherTransformersGenerationGivesTheSameModel) {
  TempDir dir;
  const std::string sizes = R"("model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 50)";
  // transformers 4: torch_dtype, rope_theta and rope_scaling; transformers 5: dtype and rope_parameters.
  const std::string v4 = writeJson(dir, "v4.json", "{" + sizes + R"(, "torch_dtype": "bfloat16",
    "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 16}})");
  const std::string v5 = writeJson(dir, "v5.json", "{" + sizes + R"(, "dtype": "bfloat16",
    "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 16}})");
  auto a = small("LlamaForCausalLM", "{config: " + v4 + "}"), b = small("LlamaForCausalLM", "{config: " + v5 + "}");
  for (const auto* m : {a.get(), b.get()}) {
    EXPECT_EQ(m->config().rope_theta, 500000.0);
    EXPECT_EQ(m->config().rope_scaling.type, ops::RopeScaling::Type::kLlama3);
    EXPECT_EQ(m->config().rope_scaling.original_max_position_embeddings, 16);
  }
  autograd::TapeScope no_grad(nullptr);
  const Tensor ids = Tensor::fromHost(testDevice(), {1, 20}, std::vector<std::int64_t>(20, 7));
  EXPECT_EQ((*a)(nn::Inputs{{{"input_ids", ids}}}).toHost(), (*b)(nn::Inputs{{{"input_ids", ids}}}).toHost());
}

TEST(LanguageModel, ArchitectureFlagsNotImplementedAreRefusedByName) {
  TempDir dir;
  const auto refusal = [&](const std::string& name, const std::string& json) {
    const std::string path = writeJson(dir, name, json);
    return errorOf<UsageError>([&] { buildModel("AutoModelForCausalLM", "{config: " + path + "}"); });
  };
  const std::string sizes = R"("hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 50)";
  const std::string path = (dir.path() / "x.json").string();
  EXPECT_EQ(refusal("x.json", R"({"model_type": "phi3", )" + sizes +
                                  R"(, "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}})"),
            path + ": rope_parameters: partial_rotary_factor 0.5 is not implemented: rotary embeddings turn every "
                   "dimension of a head (1.0)");
  EXPECT_EQ(refusal("x.json", R"({"model_type": "gemma2", )" + sizes + R"(, "layer_types": ["full_attention"]})"),
            path + ": layer_types: 1 entries for 2 layers (num_hidden_layers)");
  EXPECT_EQ(refusal("x.json", R"({"model_type": "mixtral", "num_key_value_heads": 2, )" + sizes +
                                  R"(, "num_local_experts": 2, "num_experts_per_tok": 3})"),
            path + " and model.init_args: num_experts_per_tok 3 must be between 1 and num_local_experts 2");
  EXPECT_EQ(refusal("x.json", R"({"model_type": "mixtral", )" + sizes + R"(, "router_jitter_noise": 0.1})"),
            path + ": router_jitter_noise: 0.1 is not implemented: the router reads the hidden states as they are (0)");
  EXPECT_EQ(refusal("x.json", R"({"model_type": "qwen2", )" + sizes + R"(, "attention_bias": true})"),
            path + ": attention_bias: is not a Qwen2Config key hpu-train implements; a key it does not know could change "
                   "the architecture, so it is refused rather than ignored (remove it if it does not)");
  EXPECT_EQ(refusal("x.json", R"({"model_type": "falcon", )" + sizes + "}"),
            "model.init_args.config: model_type 'falcon' in " + path +
                " is not a model hpu-train builds; supported: llama, mistral, qwen2, gemma, gemma2, phi3, mixtral, gpt2");
}


TEST(LanguageModel, TiedEmbeddingsProjectWithTheEmbeddingAndCountOnce) {
  auto untied = small("LlamaForCausalLM", kTinyLlama);
  auto tied =
      small("LlamaForCausalLM",
            "{vocab_size: 40, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: "
            "4, num_key_value_heads: 2, max_position_embeddings: 64, tie_word_embeddings: true}");
  EXPECT_EQ(untied->numParameters() - tied->numParameters(), 40 * 32);
  std::vector<std::string> names;
  for (const nn::NamedTensor& p : tied->namedParameters()) names.push_back(p.name);
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("lm_head.weight")));
  // The gradient of the tied weight gathers both uses.
  autograd::Tape tape;
  const Tensor ids = Tensor::fromHost(testDevice(), {1, 5}, std::vector<std::int64_t>{1, 2, 3, 4, 5});
  {
    autograd::TapeScope scope(&tape);
    tape.backward(ops::sum((*tied)(nn::Inputs{{{"input_ids", ids}}})));
  }
  EXPECT_TRUE(tied->namedParameters().front().tensor.grad().defined());
}

TEST(LanguageModel, ActivationCheckpointingGivesTheSameGradients) {
  for (const char* family : {"LlamaForCausalLM", "GPT2LMHeadModel"}) {
    SCOPED_TRACE(family);
    const std::string args = std::string(family) == "LlamaForCausalLM" ? kTinyLlama : kTinyGpt2;
    auto plain = small(family, args);
    auto checkpointed = small(family, args.substr(0, args.size() - 1) + ", gradient_checkpointing: true}");
    const Tensor ids =
        Tensor::fromHost(testDevice(), {2, 6}, std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3});
    const Tensor labels =
        Tensor::fromHost(testDevice(), {2, 6}, std::vector<std::int64_t>{2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4});
    for (auto* m : {plain.get(), checkpointed.get()}) {
      m->eval();  // no dropout: the two runs see the same masks trivially
      autograd::Tape tape;
      autograd::TapeScope scope(&tape);
      tape.backward(ops::crossEntropy((*m)(nn::Inputs{{{"input_ids", ids}}}), labels, ops::CrossEntropyOptions{}));
    }
    const auto a = plain->namedParameters(), b = checkpointed->namedParameters();
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i].tensor.grad().toHost(), b[i].tensor.grad().toHost()) << a[i].name;
  }
}

// gradient_checkpointing: selective recomputes the attention core in backward
// (Megatron-LM's selective recompute): the same gradients, the attention
// dropout's masks redrawn alike, and after forward what the core keeps for
// its backward beyond q, k and v is not held: with the fused kernel each
// layer's output [B, T, hidden] and its softmax statistics [B, heads, T], in
// fp32; with eager attention (whose products keep no output) its
// probabilities [B, heads, T, T] and their dropped-out copy.
TEST(LanguageModel, SelectiveRecomputeGivesTheSameGradientsAndKeepsNoAttentionOutput) {
  const std::uint64_t outputs = 2 * 6 * 32 * 4, statistics = 2 * 4 * 6 * 4, probabilities = 2 * 4 * 6 * 6 * 4;
  for (const char* family : {"LlamaForCausalLM", "GPT2LMHeadModel"})
    for (const char* attention : {"sdpa", "eager"}) {
      SCOPED_TRACE(std::string(family) + " " + attention);
      const bool llama = std::string(family) == "LlamaForCausalLM";
      const std::string tiny = llama ? kTinyLlama : kTinyGpt2;
      const std::string args = tiny.substr(0, tiny.size() - 1) + ", attn_implementation: " + attention +
                               (llama ? ", attention_dropout: 0.5" : ", attn_pdrop: 0.5, resid_pdrop: 0.0, embd_pdrop: 0.0");
      auto plain = small(family, args + "}");
      auto selective = small(family, args + ", gradient_checkpointing: selective}");
      const Tensor ids =
          Tensor::fromHost(testDevice(), {2, 6}, std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3});
      const Tensor labels =
          Tensor::fromHost(testDevice(), {2, 6}, std::vector<std::int64_t>{2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4});
      std::vector<std::uint64_t> kept;
      for (auto* m : {plain.get(), selective.get()}) {
        m->train();
        autograd::Tape tape;
        autograd::TapeScope scope(&tape);
        const std::uint64_t before = testDevice().allocator().stats().inUse;
        const Tensor loss = ops::crossEntropy((*m)(nn::Inputs{{{"input_ids", ids}}}), labels, ops::CrossEntropyOptions{});
        kept.push_back(testDevice().allocator().stats().inUse - before);
        tape.backward(loss);
      }
      const auto a = plain->namedParameters(), b = selective->namedParameters();
      for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(a[i].tensor.grad().toHost(), b[i].tensor.grad().toHost()) << a[i].name;
      if (std::string(attention) == "sdpa")
        EXPECT_EQ(kept[0] - kept[1], 2 * (outputs + statistics)) << "2 layers' attention outputs and statistics";
      else
        EXPECT_EQ(kept[0] - kept[1], 2 * 2 * probabilities)
            << "2 layers' probabilities (softmax's backward reads them) and their dropped-out copy (the product's)";
    }
}

TEST(LanguageModel, GreedyGenerationWithTheCacheEqualsItWithoutTokenForToken) {
  for (const char* family : {"LlamaForCausalLM", "GPT2LMHeadModel"}) {
    SCOPED_TRACE(family);
    auto model = small(family, std::string(family) == "LlamaForCausalLM" ? kTinyLlama : kTinyGpt2, 11);
    model->eval();
    Generator rng(3);
    const std::vector<std::int64_t> prompt{5, 17, 2, 30};
    const auto cached = model->generate(prompt, {.max_new_tokens = 20}, rng, true);
    const auto recomputed = model->generate(prompt, {.max_new_tokens = 20}, rng, false);
    EXPECT_EQ(cached.size(), 20u);
    EXPECT_EQ(cached, recomputed);
    // Sampling from one seed repeats; another seed differs somewhere.
    Generator a(9), b(9), c(10);
    const models::GenerationOptions sample{.max_new_tokens = 20, .do_sample = true, .temperature = 1.5f, .top_k = 0};
    EXPECT_EQ(model->generate(prompt, sample, a), model->generate(prompt, sample, b));
    EXPECT_NE(model->generate(prompt, sample, a), model->generate(prompt, sample, c));
  }
}

// A padded vocabulary's rows are never generated: GPT-2 with 40 tokens in
// 64 rows, its final norm giving ones and its (tied) token rows -1, so that
// every token's logit is -32 and every padding row's 0. Greedy and sampled
// decoding (all tokens, or the top 5) pick tokens only.
TEST(LanguageModel, PaddingRowsAreNeverGenerated) {
  auto model = small("GPT2LMHeadModel", "{vocab_size: 40, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 64, "
                                        "make_vocab_size_divisible_by: 64}");
  model->eval();
  for (const nn::NamedTensor& p : model->namedParameters()) {
    Tensor t = p.tensor;
    const std::span<float> values = t.values();
    if (p.name == "transformer.ln_f.weight") std::fill(values.begin(), values.end(), 0.0f);
    if (p.name == "transformer.ln_f.bias") std::fill(values.begin(), values.end(), 1.0f);
    if (p.name == "transformer.wte.weight") {
      ASSERT_EQ(t.shape(), (Shape{64, 32}));
      std::fill(values.begin(), values.begin() + 40 * 32, -1.0f);
    }
  }
  const Tensor ids = Tensor::fromHost(testDevice(), {1, 2}, std::vector<std::int64_t>{5, 17});
  const std::vector<float> logits = (*model)(nn::Inputs{{{"input_ids", ids}}}).toHost();
  ASSERT_EQ(logits.size(), 2u * 64);
  EXPECT_NEAR(logits[0], -32.0f, 1e-4);
  EXPECT_EQ(logits[63], 0.0f) << "a padding row's logit, the largest";
  for (const models::GenerationOptions& o :
       {models::GenerationOptions{.max_new_tokens = 8},
        models::GenerationOptions{.max_new_tokens = 30, .do_sample = true, .top_k = 0},
        models::GenerationOptions{.max_new_tokens = 30, .do_sample = true, .top_k = 5}})
    for (bool cache : {true, false}) {
      Generator rng(4);
      const std::vector<std::int64_t> tokens = model->generate({5, 17}, o, rng, cache);
      ASSERT_FALSE(tokens.empty());
      EXPECT_LT(*std::max_element(tokens.begin(), tokens.end()), 40) << "top_k " << o.top_k;
      if (!o.do_sample) {
        EXPECT_EQ(tokens.front(), 0) << "ties go to the first token";
      }
    }
}

// Decoding in buckets (optimum-habana's --bucket_size --bucket_internal)
// attends to the same keys, so it yields the same tokens; its graphs read the
// cache's filled part rounded up to a bucket, one graph per bucket: a prompt
// of 4 and 20 new tokens (capacity 24) decode over 8, 12, ..., 24 keys in
// buckets of 4 against the whole 24: in lazy mode, four decoding graphs more
// (the one over 24 keys is the unbucketed run's, and so is the prefill's:
// the prompt's forward attends to its own 4 keys either way). A
// cache allocated whole up front (reuse_cache) gives the same tokens; without
// it the first new token's graph is one of its own: it pads the cache from
// the prompt's 4 rows to 24.
void checkBucketedDecoding(const char* family, const char* init_args) {
  SCOPED_TRACE(family);
  device::Platform platform =
      device::Platform::fromEnv(Environment{{"HPU_EMULATOR_DEVICES", "1"}, {"PT_HPU_LAZY_MODE", "1"}});
  device::Device& dev = platform.device(0);
  auto model = small(family, init_args, 11, dev);
  model->eval();
  const std::vector<std::int64_t> prompt{5, 17, 2, 30};
  const auto compilations = [&](const models::GenerationOptions& o, std::vector<std::int64_t>& tokens) {
    const std::uint64_t before = dev.graph().stats().compilations;
    Generator rng(3);
    tokens = model->generate(prompt, o, rng);
    return dev.graph().stats().compilations - before;
  };
  std::vector<std::int64_t> whole, bucketed, padded, padded_bucketed;
  EXPECT_EQ(compilations({.max_new_tokens = 20, .reuse_cache = true}, whole), 2u)
      << "the prefill and one decoding graph";
  EXPECT_EQ(compilations({.max_new_tokens = 20, .reuse_cache = true}, whole), 0u);
  EXPECT_EQ(compilations({.max_new_tokens = 20, .bucket_size = 4, .reuse_cache = true}, bucketed), 4u);
  EXPECT_EQ(bucketed, whole);
  EXPECT_EQ(compilations({.max_new_tokens = 20}, padded), 2u) << "a prefill over 4 keys and the pad's step";
  EXPECT_EQ(compilations({.max_new_tokens = 20, .bucket_size = 4}, padded_bucketed), 1u) << "the pad's step over 8";
  EXPECT_EQ(padded, whole);
  EXPECT_EQ(padded_bucketed, whole);
}

TEST(LanguageModel, BucketedDecodingGivesTheSameTokensWithAGraphPerBucket) {
  checkBucketedDecoding("LlamaForCausalLM", kTinyLlama);
  checkBucketedDecoding("GPT2LMHeadModel", kTinyGpt2);
}

TEST(LanguageModel, GenerationLongerThanThePositionsIsRefused) {
  auto model = small("LlamaForCausalLM", kTinyLlama);
  Generator rng(1);
  EXPECT_EQ(errorOf<UsageError>([&] {
              model->generate({1, 2, 3}, {.max_new_tokens = 62}, rng);
            }),
            "LlamaForCausalLM: a prompt of 3 tokens and max_new_tokens 62 exceed max_position_embeddings 64");
}

}  // namespace
}  // namespace hpu::core
