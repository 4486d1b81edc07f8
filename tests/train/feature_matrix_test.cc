// The feature matrix: every combination of strategy x model source x tuning
// x precision x subcommand, generated, on a tiny language model for 2 steps
// on 1-4 local ranks. Each cell either runs (and, where the math is one
// device's, gives one device's result) or is refused by the process the user
// started, with exit 2 and a message, before any rank starts. No cell may
// crash, hang or fail on a rank.
//
// CI runs a sample of the cells that changes with the commit (every cell
// over time); HPU_FEATURE_MATRIX=all runs them all, HPU_FEATURE_MATRIX=N a
// sample of N, HPU_FEATURE_MATRIX="fp8 resume" the cells with each word as
// their precision, tuning, source or subcommand. Every run writes its verdicts as a Markdown table to
// $HPU_FEATURE_MATRIX_TABLE (default: feature-matrix.md in the test's
// scratch directory) and prints it; scripts/feature-matrix.sh runs the whole
// matrix and writes docs/feature-matrix.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <algorithm>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "train_support.h"

namespace hpu::cli::testing {
namespace {

namespace fs = std::filesystem;

// The dimensions, in the order the table lists them.
struct Strategy {
  std::string name;
  std::vector<std::string> args;
  int data_parallel = 1;  // replicas reading different batches
  bool experts = false;   // runs the mixture-of-experts model
};

const std::vector<Strategy>& strategies() {
  static const std::vector<Strategy> all = [] {
    const std::string mp = "--trainer.strategy=ModelParallelStrategy", s = "--trainer.strategy.init_args.";
    return std::vector<Strategy>{
        {"single", {"--trainer.devices=1"}},
        {"hpu_parallel x2", {"--trainer.devices=2", "--trainer.strategy=hpu_parallel"}, 2},
        {"zero1 x2", {"--trainer.devices=2", "--trainer.strategy=deepspeed_stage_1"}, 2},
        {"zero2 x2", {"--trainer.devices=2", "--trainer.strategy=deepspeed_stage_2"}, 2},
        {"zero2 offload x2", {"--trainer.devices=2", "--trainer.strategy=deepspeed_stage_2_offload"}, 2},
        {"zero3 x2", {"--trainer.devices=2", "--trainer.strategy=deepspeed_stage_3"}, 2},
        {"zero3 offload x2", {"--trainer.devices=2", "--trainer.strategy=deepspeed_stage_3_offload"}, 2},
        {"fsdp x2", {"--trainer.devices=2", "--trainer.strategy=fsdp"}, 2},
        {"tp2", {"--trainer.devices=2", mp, s + "tensor_parallel_size=2"}},
        {"pp2", {"--trainer.devices=2", mp, s + "tensor_parallel_size=1", s + "pipeline_parallel_size=2"}},
        {"tp2 x pp2", {"--trainer.devices=4", mp, s + "tensor_parallel_size=2", s + "pipeline_parallel_size=2"}},
        {"tp2 x dp2 zero1",
         {"--trainer.devices=4", mp, s + "tensor_parallel_size=2", s + "data_parallel_size=2", s + "zero_stage=1"},
         2},
        {"ep2 x dp2",
         {"--trainer.devices=2", mp, s + "tensor_parallel_size=1", s + "data_parallel_size=2",
          s + "expert_parallel_size=2"},
         2,
         true},
    };
  }();
  return all;
}
const std::vector<std::string> kSources{"config", "pretrained"};
const std::vector<std::string> kTunings{"full", "lora"};
const std::vector<std::string> kPrecisions{"32-true", "bf16-mixed", "fp8"};
const std::vector<std::string> kSubcommands{"fit", "resume", "validate", "predict", "export"};

struct Cell {
  int strategy;
  std::string source, tuning, precision, subcommand;
};

std::vector<Cell> allCells() {
  std::vector<Cell> out;
  for (int s = 0; s < static_cast<int>(strategies().size()); ++s)
    for (const auto& source : kSources)
      for (const auto& tuning : kTunings)
        for (const auto& precision : kPrecisions)
          for (const auto& sub : kSubcommands) out.push_back({s, source, tuning, precision, sub});
  return out;
}

// The commit's hash as a number (0 outside a git checkout).
std::uint64_t commitSeed() {
  std::string cmd = std::string("git -C '") + HPU_SOURCE_DIR + "' rev-parse HEAD 2>/dev/null";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  char buf[64] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  ::pclose(p);
  return n >= 16 ? std::stoull(std::string(buf, 16), nullptr, 16) : 0;
}

// The cells this run covers: all, or a sample drawn by the commit.
std::vector<Cell> chosenCells() {
  std::vector<Cell> cells = allCells();
  const char* env = std::getenv("HPU_FEATURE_MATRIX");
  const std::string want = env ? env : "";
  if (want == "all") return cells;
  if (!want.empty() && !std::isdigit(static_cast<unsigned char>(want[0]))) {
    // Words: the cells whose precision, tuning, source or subcommand is each of them.
    std::istringstream words(want);
    for (std::string w; words >> w;)
      std::erase_if(cells, [&](const Cell& c) {
        return c.precision != w && c.tuning != w && c.source != w && c.subcommand != w;
      });
    return cells;
  }
  const std::size_t n = want.empty() ? 10 : std::stoul(want);
  std::mt19937_64 rng(commitSeed());
  std::shuffle(cells.begin(), cells.end(), rng);
  cells.resize(std::min(n, cells.size()));
  return cells;
}

constexpr const char* kBase = R"(seed_everything: 3
data:
  class_path: TextDataModule
  init_args: {path: corpus.txt, block_size: 16, batch_size: 2, val_split: 0.25}
optimizer:
  class_path: SGD
  init_args: {lr: 0.1}
trainer:
  max_steps: 2
  limit_val_batches: 2
  num_sanity_val_steps: 0
  log_every_n_steps: 1
  enable_progress_bar: false
  enable_model_summary: false
  logger: {class_path: CSVLogger, init_args: {version: 0}}
  callbacks: [{class_path: ModelCheckpoint, init_args: {save_last: true, every_n_train_steps: 1, save_top_k: -1}}]
)";

constexpr const char* kLlama = R"(model:
  class_path: LlamaForCausalLM
  init_args:
    vocab_size: 256
    hidden_size: 32
    intermediate_size: 48
    num_hidden_layers: 2
    num_attention_heads: 4
    num_key_value_heads: 2
    max_position_embeddings: 64
)";

constexpr const char* kMixtral = R"(model:
  class_path: MixtralForCausalLM
  init_args:
    vocab_size: 256
    hidden_size: 32
    intermediate_size: 24
    num_hidden_layers: 2
    num_attention_heads: 4
    num_key_value_heads: 2
    max_position_embeddings: 64
    num_local_experts: 4
)";

const std::string kLora = "--model.init_args.lora={r: 4, lora_alpha: 8, target_modules: [q_proj, k_proj, v_proj, o_proj]}";

struct Verdict {
  std::string text;  // for the table
  bool failed = false;
};

class FeatureMatrixTest : public TrainRunTest {
 protected:
  void SetUp() override {
    TrainRunTest::SetUp();
    std::string text;
    for (int i = 0; i < 40; ++i) text += "the quick brown fox " + std::to_string(i % 7) + " jumps over the lazy dog. ";
    write("corpus.txt", text);
    write("base.yaml", kBase);
    write("llama.yaml", kLlama);
    write("mixtral.yaml", kMixtral);
  }

  // model.yaml's file for a cell: the config, or a pretrained directory
  // (exported once from one device's 1-step run of the config).
  std::string modelConfig(bool experts, const std::string& source) {
    const std::string family = experts ? "mixtral" : "llama";
    if (source == "config") return family + ".yaml";
    const std::string file = family + "_pretrained.yaml";
    if (!fs::exists(dir() / file)) {
      const std::string root = "make_" + family;
      RunResult r = run({"fit", "-c", "base.yaml", "-c", family + ".yaml", "--trainer.max_steps=1",
                         "--trainer.default_root_dir=" + root});
      EXPECT_EQ(r.exit_code, 0) << r.describe();
      r = run({"export", "--ckpt_path", (dir() / root / "lightning_logs/version_0/checkpoints/last.ckpt").string(),
               "--output", (dir() / (family + "_hf")).string()});
      EXPECT_EQ(r.exit_code, 0) << r.describe();
      write(file, std::string("model:\n  class_path: AutoModelForCausalLM\n  init_args: {pretrained: ") + family +
                      "_hf}\n");
    }
    return file;
  }

  std::vector<std::string> layoutArgs(const Cell& c, int strategy, int batch_scale = 1) {
    const Strategy& s = strategies()[static_cast<std::size_t>(strategy)];
    std::vector<std::string> args{"-c", "base.yaml", "-c", modelConfig(strategies()[c.strategy].experts, c.source),
                                  "--trainer.precision=" + c.precision};
    args.insert(args.end(), s.args.begin(), s.args.end());
    if (c.tuning == "lora") args.push_back(kLora);
    if (batch_scale > 1) args.push_back("--data.init_args.batch_size=" + std::to_string(2 * batch_scale));
    return args;
  }

  static std::string key(const Cell& c, int strategy, int batch_scale) {
    std::string k = std::string(strategies()[static_cast<std::size_t>(c.strategy)].experts ? "moe_" : "") +
                    std::to_string(strategy) + "_" + c.source + "_" + c.tuning + "_" + c.precision + "_b" +
                    std::to_string(batch_scale);
    for (char& ch : k)
      if (ch == '-' || ch == '.') ch = '_';
    return k;
  }

  // Fits the cell's layout (or `strategy`'s with the data-parallel batch on
  // one device) once; returns its run and root.
  std::pair<RunResult, std::string> fitLayout(const Cell& c, int strategy, int batch_scale = 1) {
    const std::string root = "fit_" + key(c, strategy, batch_scale);
    if (auto it = fits_.find(root); it != fits_.end()) return {it->second, root};
    std::vector<std::string> args{"fit", "--trainer.default_root_dir=" + root};
    const auto more = layoutArgs(c, strategy, batch_scale);
    args.insert(args.end(), more.begin(), more.end());
    const RunResult r = run(args);
    fits_.emplace(root, r);
    return {r, root};
  }

  fs::path lastCheckpoint(const std::string& root, const std::string& name = "last.ckpt") const {
    return dir() / root / "lightning_logs/version_0/checkpoints" / name;
  }

  // The checkpoint's model weights whole (a distributed one consolidated),
  // with the fp8 layers' scaling state (`fp8_state`) or without it: the
  // gradients' scales depend on the layout (a data-parallel rank's loss is
  // over its own micro-batch), so only a resumed run must repeat them.
  std::map<std::string, std::vector<float>> weights(const fs::path& ckpt, bool fp8_state = true) {
    fs::path whole = ckpt;
    if (fs::exists(ckpt.string() + ".rank0")) {
      whole = ckpt.string() + ".whole";
      const RunResult r = run({"consolidate", ckpt.string(), whole.string()});
      EXPECT_EQ(r.exit_code, 0) << r.describe();
    }
    std::map<std::string, std::vector<float>> out;
    for (const auto& t : readCheckpoint(whole).tensors) {
      const bool state = t.name.ends_with(".fp8_scale") || t.name.ends_with(".fp8_amax_history");
      if ((t.name.rfind("model.", 0) == 0 || t.name.rfind("lm_head.", 0) == 0) && (fp8_state || !state))
        out[t.name] = std::vector<float>(t.values.begin(), t.values.end());
    }
    return out;
  }

  // "" when every weight agrees within `rel` of the largest of its tensor,
  // or with `model_scale` of the largest of the model (reduced precisions,
  // whose rounding does not shrink with a small tensor such as a young
  // LoRA B).
  static std::string compare(const std::map<std::string, std::vector<float>>& got,
                             const std::map<std::string, std::vector<float>>& want, double rel,
                             bool model_scale = false) {
    if (got.size() != want.size())
      return "holds " + std::to_string(got.size()) + " tensors, one device " + std::to_string(want.size());
    double largest = 1e-3;
    for (const auto& [name, w] : want)
      for (const float v : w) largest = std::max(largest, std::abs(double(v)));
    for (const auto& [name, w] : want) {
      const auto it = got.find(name);
      if (it == got.end() || it->second.size() != w.size()) return name + " differs in shape";
      double scale = model_scale ? largest : 1e-3, worst = 0;
      for (std::size_t i = 0; i < w.size(); ++i) {
        if (!model_scale) scale = std::max(scale, std::abs(double(w[i])));
        worst = std::max(worst, std::abs(double(it->second[i]) - double(w[i])));
      }
      if (!(worst <= rel * scale)) {
        std::ostringstream m;
        m << name << " differs by " << worst;
        return m.str();
      }
    }
    return "";
  }

  // A cell that did not run: refused before any rank started, or failed.
  static Verdict notRun(const RunResult& r) {
    if (r.exit_code == 2 && r.err.find("[rank ") == std::string::npos) {
      std::string first = r.err.substr(r.err.find("error: ") == std::string::npos ? 0 : r.err.find("error: ") + 7);
      first = first.substr(0, first.find('\n'));
      return {"refused: " + first.substr(0, 160)};
    }
    return {"FAILED: " + r.describe().substr(0, 400), true};
  }

  Verdict runCell(const Cell& c);

  std::map<std::string, RunResult> fits_;
};

Verdict FeatureMatrixTest::runCell(const Cell& c) {
  const Strategy& s = strategies()[static_cast<std::size_t>(c.strategy)];
  const auto [fit, root] = fitLayout(c, c.strategy);
  if (fit.exit_code != 0) return notRun(fit);
  const bool exact = c.precision == "32-true";
  // One device on the same global batch (the reference).
  const auto one = [&] { return fitLayout(c, 0, s.data_parallel); };
  const auto ckpt = lastCheckpoint(root);
  if (c.subcommand == "fit") {
    if (c.strategy == 0) return {"runs"};
    const auto [ref, ref_root] = one();
    if (ref.exit_code != 0) return {"FAILED: one device: " + ref.describe().substr(0, 300), true};
    const std::string diff = compare(weights(ckpt, false), weights(lastCheckpoint(ref_root), false), exact ? 1e-4 : 5e-2, !exact);
    if (!diff.empty()) return {"FAILED: not one device's weights: " + diff, true};
    return {exact ? "one device's weights" : "one device's weights (to 5% of the largest)"};
  }
  if (c.subcommand == "resume") {
    // Step 1's checkpoint resumed to step 2 ends on the uninterrupted run's weights.
    const std::string again = "resume_" + key(c, c.strategy, 1);
    std::vector<std::string> args{"fit", "--trainer.default_root_dir=" + again,
                                  "--ckpt_path=" + lastCheckpoint(root, "epoch=0-step=1.ckpt").string()};
    const auto more = layoutArgs(c, c.strategy);
    args.insert(args.end(), more.begin(), more.end());
    const RunResult r = run(args);
    if (r.exit_code != 0) return notRun(r);
    // fp8 layers' scales and amax windows are buffers: checkpoints carry them.
    const std::string diff = compare(weights(lastCheckpoint(again)), weights(ckpt), 1e-5);
    if (!diff.empty()) return {"FAILED: resumed weights differ: " + diff, true};
    return {"the uninterrupted run's weights"};
  }
  if (c.subcommand == "validate") {
    const std::string val = "validate_" + key(c, c.strategy, 1);
    std::vector<std::string> args{"validate", "--trainer.default_root_dir=" + val, "--ckpt_path=" + ckpt.string()};
    const auto more = layoutArgs(c, c.strategy);
    args.insert(args.end(), more.begin(), more.end());
    const RunResult r = run(args);
    if (r.exit_code != 0) return notRun(r);
    const double loss = readCsv(dir() / val / "lightning_logs/version_0/metrics.csv").valueAt("val_loss", 0);
    if (!std::isfinite(loss)) return {"FAILED: val_loss is not finite", true};
    return {"runs"};
  }
  if (c.subcommand == "predict") {
    // The layout's generation of its own weights is one device's.
    const auto predict = [&](int strategy, const std::string& out) {
      std::vector<std::string> args{"predict", "--trainer.default_root_dir=" + out, "--trainer.logger=false",
                                    "--ckpt_path=" + ckpt.string(), "--model.init_args.prompt=the quick",
                                    "--model.init_args.max_new_tokens=6"};
      const auto more = layoutArgs(c, strategy);
      args.insert(args.end(), more.begin(), more.end());
      return run(args);
    };
    const std::string out = "predict_" + key(c, c.strategy, 1);
    const RunResult r = predict(c.strategy, out);
    if (r.exit_code != 0) return notRun(r);
    if (c.strategy == 0) return {"runs"};
    const std::string ref_out = "predict_one_" + key(c, c.strategy, 1);
    const RunResult ref = predict(0, ref_out);
    if (ref.exit_code != 0) return {"FAILED: one device: " + ref.describe().substr(0, 300), true};
    std::ifstream a(dir() / out / "predictions.jsonl"), b(dir() / ref_out / "predictions.jsonl");
    std::stringstream sa, sb;
    sa << a.rdbuf();
    sb << b.rdbuf();
    if (sa.str().empty() || sa.str() != sb.str()) return {"FAILED: not one device's tokens: " + sa.str(), true};
    return {"one device's tokens"};
  }
  // export: one process on one device writes the Hugging Face directory of
  // any layout's checkpoint; its weights are the checkpoint's.
  const fs::path out = dir() / ("export_" + key(c, c.strategy, 1));
  const RunResult r = run({"export", "--ckpt_path", ckpt.string(), "--output", out.string()});
  if (r.exit_code != 0) return notRun(r);
  if (!fs::exists(out / "config.json") || !fs::exists(out / "model.safetensors"))
    return {"FAILED: no config.json or model.safetensors", true};
  return {"writes the Hugging Face directory"};
}

TEST_F(FeatureMatrixTest, EveryCellRunsOrIsRefusedBeforeAnyRankStarts) {
  const std::vector<Cell> cells = chosenCells();
  std::ostringstream table;
  table << "| strategy | model | tuning | precision | subcommand | verdict |\n|---|---|---|---|---|---|\n";
  int failed = 0;
  for (const Cell& c : cells) {
    const Verdict v = runCell(c);
    failed += v.failed;
    if (v.failed)
      ADD_FAILURE() << strategies()[static_cast<std::size_t>(c.strategy)].name << " / " << c.source << " / "
                    << c.tuning << " / " << c.precision << " / " << c.subcommand << ": " << v.text;
    table << "| " << strategies()[static_cast<std::size_t>(c.strategy)].name << " | " << c.source << " | "
          << c.tuning << " | " << c.precision << " | " << c.subcommand << " | " << v.text << " |\n";
  }
  const char* path = std::getenv("HPU_FEATURE_MATRIX_TABLE");
  const fs::path out = path ? fs::path(path) : dir() / "feature-matrix.md";
  std::ofstream(out) << table.str();
  std::cout << table.str() << cells.size() << " cells, " << failed << " failed\n";
}

}  // namespace
}  // namespace hpu::cli::testing
