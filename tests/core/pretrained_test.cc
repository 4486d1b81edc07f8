// Hugging Face model directories: a model exported with exportPretrained
// loads back (one file or sharded, F32 / BF16 / F16) to the same weights and
// logits; weights that do not fit the config are listed by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "hpu/core/checkpoint/safetensors_file.h"
#include "hpu/core/models/causal_lm.h"
#include "hpu/core/models/hf_directory.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/device/numerics.h"
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

const char* kTinyLlama =
    "{vocab_size: 40, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
    "num_key_value_heads: 2, max_position_embeddings: 64}";
const char* kTinyGpt2 = "{vocab_size: 40, n_embd: 32, n_layer: 2, n_head: 4, n_positions: 64}";

std::vector<float> logitsOf(models::CausalLM& m) {
  autograd::TapeScope no_grad(nullptr);
  m.eval();
  const std::vector<std::int64_t> ids{3, 1, 4, 1, 5, 9, 2, 6};
  const Tensor out = m(nn::Inputs{{{"input_ids", Tensor::fromHost(testDevice(), {1, 8}, ids)}}});
  return out.toHost();
}

void expectSameParameters(const models::CausalLM& a, const models::CausalLM& b) {
  const auto pa = a.namedParameters(), pb = b.namedParameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i].name, pb[i].name);
    EXPECT_EQ(pa[i].tensor.toHost(), pb[i].tensor.toHost()) << pa[i].name;
  }
}

TEST(Pretrained, AnExportedModelLoadsBackToTheSameWeightsAndLogits) {
  for (const char* family : {"LlamaForCausalLM", "GPT2LMHeadModel"}) {
    SCOPED_TRACE(family);
    TempDir dir;
    auto trained = lm(family, std::string(family) == "LlamaForCausalLM" ? kTinyLlama : kTinyGpt2, 5);
    trained->exportPretrained(dir.file("hf"));
    EXPECT_THAT(TempDir::entriesOf(dir.file("hf")),
                ::testing::ElementsAre("config.json", "generation_config.json", "model.safetensors"));
    auto loaded = lm(family, "{pretrained: " + dir.file("hf") + "}", 99);
    expectSameParameters(*trained, *loaded);
    EXPECT_EQ(logitsOf(*trained), logitsOf(*loaded));
    // GPT-2 ties its head: transformers saves no lm_head.weight, nor do we.
    const auto file = checkpoint::SafetensorsFile::open(dir.file("hf") + "/model.safetensors");
    EXPECT_EQ(file->find("lm_head.weight") != nullptr, std::string(family) == "LlamaForCausalLM");
    EXPECT_EQ(file->metadata().at("format"), "pt");
  }
}

TEST(Pretrained, ShardedWeightsLoadLikeOneFile) {
  TempDir dir;
  auto trained = lm("LlamaForCausalLM", kTinyLlama, 5);
  std::vector<checkpoint::TensorEntry> tensors;
  for (const auto& p : trained->namedParameters())
    tensors.push_back({p.name, DType::kFloat32, {p.tensor.shape().dims().begin(), p.tensor.shape().dims().end()},
                       p.tensor.toHost(), {}});
  trained->exportPretrained(dir.file("hf"));
  std::filesystem::remove(dir.file("hf/model.safetensors"));
  models::writePretrainedWeights(dir.file("hf"), tensors, /*max_shard_bytes=*/8000);
  const auto entries = TempDir::entriesOf(dir.file("hf"));
  EXPECT_THAT(entries, ::testing::Contains("model.safetensors.index.json"));
  // Greedy in registration order as transformers splits: [embed, norm], [q, k],
  // [v, o, norm], [gate], [up], [down, next norm], ... [lm_head]: 12 shards.
  EXPECT_THAT(entries, ::testing::Contains("model-00001-of-00012.safetensors"));
  EXPECT_THAT(entries, ::testing::Contains("model-00012-of-00012.safetensors"));
  auto loaded = lm("LlamaForCausalLM", "{pretrained: " + dir.file("hf") + "}", 99);
  expectSameParameters(*trained, *loaded);
}

TEST(Pretrained, HalfPrecisionFilesAreWidenedExactly) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    TempDir dir;
    auto trained = lm("LlamaForCausalLM", kTinyLlama, 5);
    trained->exportPretrained(dir.file("hf"));
    std::vector<checkpoint::TensorEntry> tensors;
    for (const auto& p : trained->namedParameters()) {
      std::vector<float> v = p.tensor.toHost();
      device::roundInPlace(v, dtype);
      tensors.push_back({p.name, dtype, {p.tensor.shape().dims().begin(), p.tensor.shape().dims().end()}, v, {}});
    }
    models::writePretrainedWeights(dir.file("hf"), tensors);
    auto loaded = lm("LlamaForCausalLM", "{pretrained: " + dir.file("hf") + "}", 99);
    const auto want = trained->namedParameters(), got = loaded->namedParameters();
    for (std::size_t i = 0; i < want.size(); ++i) {
      std::vector<float> v = want[i].tensor.toHost();
      device::roundInPlace(v, dtype);
      EXPECT_EQ(got[i].tensor.toHost(), v) << want[i].name;
    }
  }
}

TEST(Pretrained, WeightsThatDoNotFitAreListedByName) {
  TempDir dir;
  auto trained = lm("LlamaForCausalLM", kTinyLlama, 5);
  trained->exportPretrained(dir.file("hf"));
  std::vector<checkpoint::TensorEntry> tensors;
  for (const auto& p : trained->namedParameters()) {
    if (p.name == "model.norm.weight") continue;
    checkpoint::TensorEntry e{p.name, DType::kFloat32,
                              {p.tensor.shape().dims().begin(), p.tensor.shape().dims().end()}, p.tensor.toHost(), {}};
    if (p.name == "model.layers.1.mlp.up_proj.weight") {
      e.shape = {24, 64};
      e.values.resize(24 * 64);
    }
    tensors.push_back(std::move(e));
  }
  tensors.push_back({"model.layers.2.mlp.up_proj.weight", DType::kFloat32, {2}, {1, 2}, {}});
  models::writePretrainedWeights(dir.file("hf"), tensors);
  EXPECT_EQ(errorOf<UsageError>([&] { lm("LlamaForCausalLM", "{pretrained: " + dir.file("hf") + "}", 9); }),
            "model.init_args.pretrained: the weights in " + dir.file("hf") +
                " do not fit the model built from its config.json:\n"
                "  missing from the files (1): model.norm.weight\n"
                "  in the files but not in the model (1): model.layers.2.mlp.up_proj.weight\n"
                "  of another shape (1): model.layers.1.mlp.up_proj.weight is [24, 64] in the files and [48, 32] in "
                "the model");
}

// Under pipeline parallelism each stage copies its own tensors from the
// files, which hold every stage's: a stage's parameters are the whole
// model's of the same names. What fits no stage of the whole model, or is
// missing from the files, is refused on every stage as on one device.
TEST(Pretrained, EachPipelineStageLoadsItsPartOfTheFiles) {
  const char* llama =
      "{vocab_size: 40, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 4, num_attention_heads: 4, "
      "num_key_value_heads: 2, max_position_embeddings: 64}";
  for (const auto& [family, args] : {std::pair{"LlamaForCausalLM", llama},
                                     std::pair{"GPT2LMHeadModel", "{vocab_size: 40, n_embd: 32, n_layer: 4, n_head: 4, "
                                                                  "n_positions: 64, tie_word_embeddings: true}"}}) {
    SCOPED_TRACE(family);
    TempDir dir;
    lm(family, args, 5)->exportPretrained(dir.file("hf"));
    const std::string pretrained = "{pretrained: " + dir.file("hf") + "}";
    auto whole = lm(family, pretrained, 99);
    std::map<std::string, std::vector<float>> values;
    for (const auto& p : whole->namedParameters()) values[p.name] = p.tensor.toHost();
    std::set<std::string> loaded;
    for (const int stage : {0, 1}) {
      auto part = lm(family, pretrained, 99, testDevice(), testing::PipelineStage{stage, 2});
      for (const auto& p : part->namedParameters()) {
        EXPECT_EQ(p.tensor.toHost(), values.at(p.name)) << "stage " << stage << ": " << p.name;
        loaded.insert(p.name);
      }
    }
    EXPECT_EQ(loaded.size(), values.size());
  }
  // The files with a tensor no stage holds, and without one of stage 1's.
  TempDir dir;
  auto trained = lm("LlamaForCausalLM", llama, 5);
  std::vector<checkpoint::TensorEntry> tensors;
  for (const auto& p : trained->namedParameters())
    if (p.name != "model.layers.3.mlp.down_proj.weight")
      tensors.push_back({p.name, DType::kFloat32, {p.tensor.shape().dims().begin(), p.tensor.shape().dims().end()},
                         p.tensor.toHost(), {}});
  tensors.push_back({"model.layers.4.mlp.up_proj.weight", DType::kFloat32, {2}, {1, 2}, {}});
  trained->exportPretrained(dir.file("hf"));
  models::writePretrainedWeights(dir.file("hf"), tensors);
  const std::string pretrained = "{pretrained: " + dir.file("hf") + "}";
  const std::string one_device = errorOf<UsageError>([&] { lm("LlamaForCausalLM", pretrained, 9); });
  EXPECT_EQ(one_device, "model.init_args.pretrained: the weights in " + dir.file("hf") +
                            " do not fit the model built from its config.json:\n"
                            "  missing from the files (1): model.layers.3.mlp.down_proj.weight\n"
                            "  in the files but not in the model (1): model.layers.4.mlp.up_proj.weight");
  for (const int stage : {0, 1})
    EXPECT_EQ(errorOf<UsageError>(
                  [&] { lm("LlamaForCausalLM", pretrained, 9, testDevice(), testing::PipelineStage{stage, 2}); }),
              one_device)
        << "stage " << stage;
}

TEST(Pretrained, ADirectoryWithoutWeightsOrConfigIsAUsageError) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("empty"));
  EXPECT_EQ(errorOf<UsageError>([&] { lm("LlamaForCausalLM", "{pretrained: " + dir.file("empty") + "}", 9); }),
            "model.init_args.pretrained: " + dir.file("empty") +
                " has no config.json (a Hugging Face model directory)");
  testing::writeBytes(dir.file("empty/config.json"), R"({"model_type": "llama", "hidden_size": 32,
    "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 40})");
  EXPECT_EQ(errorOf<UsageError>([&] { lm("LlamaForCausalLM", "{pretrained: " + dir.file("empty") + "}", 9); }),
            dir.file("empty") +
                " has neither model.safetensors nor model.safetensors.index.json: hpu-train reads safetensors weights "
                "(save them with save_pretrained(..., safe_serialization=True))");
}

// `args` (an init_args map) with `more` added.
std::string with(const std::string& args, const std::string& more) { return args.substr(0, args.size() - 1) + ", " + more + "}"; }

// make_vocab_size_divisible_by on one device: 40 tokens padded to 64 rows.
// The real rows are the unpadded model's (the same draws), the padding rows
// zero, and neither count as parameters; the tokens' logits are the unpadded
// model's. Export writes Hugging Face's [40, 32] shapes, which load into the
// unpadded model and into the padded one alike; a LoRA adapter on the head
// saves and loads in its unpadded shape too.
TEST(Pretrained, APaddedVocabularyExportsAndLoadsInHuggingFacesShapes) {
  for (const char* family : {"LlamaForCausalLM", "GPT2LMHeadModel"}) {
    SCOPED_TRACE(family);
    const bool llama = std::string(family) == "LlamaForCausalLM";
    const std::string args = llama ? kTinyLlama : kTinyGpt2, padding = "make_vocab_size_divisible_by: 64";
    auto plain = lm(family, args, 5), padded = lm(family, with(args, padding), 5);
    EXPECT_EQ(padded->numParameters(), plain->numParameters());
    EXPECT_EQ(padded->countParameters().padding, (llama ? 2 : 1) * 24 * 32) << "embedding (and an untied head)";
    const auto want = plain->namedParameters(), got = padded->namedParameters();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      std::vector<float> real = got[i].shard.whole(got[i].tensor.shape(), got[i].tensor.toHost());
      EXPECT_EQ(real, want[i].tensor.toHost()) << got[i].name;
      const std::vector<float> all = got[i].tensor.toHost();
      EXPECT_EQ(std::count(all.begin() + static_cast<std::ptrdiff_t>(real.size()), all.end(), 0.0f),
                static_cast<std::ptrdiff_t>(all.size() - real.size()))
          << got[i].name << "'s padding rows";
    }
    const std::vector<float> plain_logits = logitsOf(*plain), padded_logits = logitsOf(*padded);
    ASSERT_EQ(padded_logits.size(), 8u * 64);
    for (std::size_t t = 0; t < 8; ++t) {
      EXPECT_EQ(std::vector<float>(padded_logits.begin() + t * 64, padded_logits.begin() + t * 64 + 40),
                std::vector<float>(plain_logits.begin() + t * 40, plain_logits.begin() + (t + 1) * 40))
          << "position " << t;
    }
    TempDir dir;
    padded->exportPretrained(dir.file("hf"));
    const auto file = checkpoint::SafetensorsFile::open(dir.file("hf/model.safetensors"), /*header_only=*/true);
    for (const char* name : {"model.embed_tokens.weight", "lm_head.weight", "transformer.wte.weight"})
      if (const checkpoint::SafetensorsTensor* t = file->find(name)) {
        EXPECT_EQ(t->shape, (std::vector<std::int64_t>{40, 32})) << name;
      }
    EXPECT_NE(file->find(llama ? "lm_head.weight" : "transformer.wte.weight"), nullptr);
    expectSameParameters(*plain, *lm(family, "{pretrained: " + dir.file("hf") + "}", 99));
    expectSameParameters(*padded, *lm(family, "{pretrained: " + dir.file("hf") + ", " + padding + "}", 99));
  }
  // LoRA on Llama's (untied) head: B [40, r] in the adapter file.
  const std::string lora = "lora: {r: 2, target_modules: [lm_head, q_proj]}";
  auto adapted = lm("LlamaForCausalLM", with(kTinyLlama, "make_vocab_size_divisible_by: 64, " + lora), 5);
  for (const nn::NamedTensor& p : adapted->namedParameters())
    if (p.name == "lm_head.lora_B.weight") {
      Tensor b = p.tensor;
      EXPECT_EQ(b.shape(), (Shape{64, 2}));
      const std::span<float> values = b.values();
      p.shard.forEachRun(b.shape(), [&](std::int64_t, std::int64_t local, std::int64_t count) {
        for (std::int64_t i = local; i < local + count; ++i) values[static_cast<std::size_t>(i)] = 0.01f * (i % 7);
      });
    }
  TempDir dir;
  adapted->saveAdapter(dir.file("adapter"));
  const auto adapter = checkpoint::SafetensorsFile::open(dir.file("adapter/adapter_model.safetensors"), true);
  const checkpoint::SafetensorsTensor* b = adapter->find("base_model.model.lm_head.lora_B.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->shape, (std::vector<std::int64_t>{40, 2}));
  auto unpadded = lm("LlamaForCausalLM", with(kTinyLlama, "lora_path: " + dir.file("adapter")), 5);
  auto repadded = lm("LlamaForCausalLM",
                     with(kTinyLlama, "make_vocab_size_divisible_by: 64, lora_path: " + dir.file("adapter")), 5);
  const std::vector<float> want = logitsOf(*unpadded), got = logitsOf(*repadded);
  for (std::size_t t = 0; t < 8; ++t)
    EXPECT_EQ(std::vector<float>(got.begin() + t * 64, got.begin() + t * 64 + 40),
              std::vector<float>(want.begin() + t * 40, want.begin() + (t + 1) * 40))
        << "position " << t;
  EXPECT_EQ(got, logitsOf(*adapted));
}

TEST(Pretrained, AHeaderOnlyOpenReadsNamesAndShapes) {
  TempDir dir;
  lm("GPT2LMHeadModel", kTinyGpt2, 5)->exportPretrained(dir.file("hf"));
  const auto file = checkpoint::SafetensorsFile::open(dir.file("hf/model.safetensors"), /*header_only=*/true);
  const checkpoint::SafetensorsTensor* wte = file->find("transformer.wte.weight");
  ASSERT_NE(wte, nullptr);
  EXPECT_EQ(wte->shape, (std::vector<std::int64_t>{40, 32}));
  EXPECT_EQ(wte->dtype, DType::kFloat32);
}

}  // namespace
}  // namespace hpu::core
