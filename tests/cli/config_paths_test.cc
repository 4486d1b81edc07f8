// Paths in configs (core/config/paths.h): every key naming a file or a
// directory to read resolves a relative path from the folder of the config
// file that names it, then from the working directory (saying so); a
// command-line value from the working directory. A path found nowhere is a
// config error (exit 2, nothing run) naming file:line:col, the key and the
// resolved path; every such key of a config is reported at once.
#include <gmock/gmock.h>

#include <filesystem>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ConfigPathsTest : public HpuTrainTest {
 protected:
  void SetUp() override { fs::create_directory(dir() / "sub"); }
  void expectRejected(const std::vector<std::string>& args, const std::string& expected_err) {
    const RunResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(r.err, expected_err);
    EXPECT_FALSE(fs::exists(dir() / "lightning_logs"));
  }
  // "<key>: no such <kind>: <dir>/sub/<name> (...)": a path of sub/cfg.yaml
  // found neither beside it nor in the working directory.
  std::string missing(const std::string& at, const std::string& key, const std::string& kind,
                      const std::string& name) const {
    return "error: sub/cfg.yaml:" + at + ": " + key + ": no such " + kind + ": " + (dir() / "sub" / name).string() +
           " (a relative path in a config file is read from the file's folder; the working directory has no " + name +
           " either)\n";
  }
};

constexpr const char* kTinyLlama =
    "  class_path: LlamaForCausalLM\n"
    "  init_args: {hidden_size: 16, intermediate_size: 32, num_hidden_layers: 1, num_attention_heads: 2,\n"
    "              max_position_embeddings: 16}\n";

TEST_F(ConfigPathsTest, EveryFileValuedKeyOfALanguageModelRunIsCheckedAtOnce) {
  write("sub/cfg.yaml",
        "trainer:\n"
        "  strategy:\n"
        "    class_path: HPUDeepSpeedStrategy\n"
        "    init_args: {config: ds.json}\n"
        "model:\n"
        "  class_path: LlamaForCausalLM\n"
        "  init_args:\n"
        "    config: llama.json\n"
        "    pretrained: hf\n"
        "    lora_path: adapter\n"
        "    prompts: prompts.txt\n"
        "data:\n"
        "  class_path: InstructionDataModule\n"
        "  init_args:\n"
        "    train_file: train.jsonl\n"
        "    val_file: val.jsonl\n"
        "    tokenizer: tok\n"
        "    chat_template: template.jinja\n"
        "ckpt_path: run.ckpt\n");
  expectRejected({"fit", "-c", "sub/cfg.yaml"},
                 missing("4:25", "trainer.strategy.init_args.config", "file", "ds.json") +
                     missing("8:13", "model.init_args.config", "file or directory", "llama.json") +
                     missing("9:17", "model.init_args.pretrained", "directory", "hf") +
                     missing("10:16", "model.init_args.lora_path", "directory", "adapter") +
                     missing("11:14", "model.init_args.prompts", "file", "prompts.txt") +
                     missing("15:17", "data.init_args.train_file", "file", "train.jsonl") +
                     missing("16:15", "data.init_args.val_file", "file", "val.jsonl") +
                     missing("17:16", "data.init_args.tokenizer", "file or directory", "tok") +
                     missing("18:20", "data.init_args.chat_template", "file", "template.jinja") +
                     missing("19:12", "ckpt_path", "file", "run.ckpt"));
}

TEST_F(ConfigPathsTest, TheDataModulesFilesAndFolders) {
  write("sub/cfg.yaml", std::string("model:\n") + kTinyLlama +
                            "data:\n  class_path: TextDataModule\n  init_args: {path: corpus, tokenizer: tok.json}\n");
  expectRejected({"fit", "-c", "sub/cfg.yaml"},
                 missing("7:21", "data.init_args.path", "file or directory", "corpus") +
                     missing("7:40", "data.init_args.tokenizer", "file or directory", "tok.json"));
  write("sub/cfg.yaml",
        "model: MLPClassifier\n"
        "data:\n"
        "  class_path: CSVDataModule\n"
        "  init_args: {train_file: a.csv, val_file: b.csv, test_file: c.csv, predict_file: d.csv}\n");
  expectRejected({"fit", "-c", "sub/cfg.yaml"},
                 missing("4:27", "data.init_args.train_file", "file", "a.csv") +
                     missing("4:44", "data.init_args.val_file", "file", "b.csv") +
                     missing("4:62", "data.init_args.test_file", "file", "c.csv") +
                     missing("4:83", "data.init_args.predict_file", "file", "d.csv"));
  write("sub/cfg.yaml", "model: MLPClassifier\ndata:\n  class_path: FashionMNISTDataModule\n  init_args: {data_dir: fm}\n");
  expectRejected({"fit", "-c", "sub/cfg.yaml"}, missing("4:25", "data.init_args.data_dir", "directory", "fm"));
}

TEST_F(ConfigPathsTest, AFileOfTheWrongKindIsRefused) {
  write("sub/hf", "not a directory\n");
  write("sub/cfg.yaml", std::string("model:\n") + kTinyLlama + "  pretrained: hf\ndata: RandomTokensDataModule\n");
  // The shorthand puts pretrained beside init_args; its location is its own.
  expectRejected({"fit", "-c", "sub/cfg.yaml"},
                 "error: sub/cfg.yaml:5:15: model.init_args.pretrained: " + (dir() / "sub/hf").string() +
                     " is not a directory; a directory is expected\n");
}

TEST_F(ConfigPathsTest, ACommandLinePathIsReadFromTheWorkingDirectory) {
  write("sub/cfg.yaml", std::string("model:\n") + kTinyLlama + "data: RandomTokensDataModule\n");
  expectRejected({"fit", "-c", "sub/cfg.yaml", "--model.pretrained=hf"},
                 "error: command line: model.init_args.pretrained: no such directory: " + (dir() / "hf").string() +
                     " (a relative path given here is read from the working directory)\n");
  expectRejected({"fit", "-c", "sub/cfg.yaml", "--model.pretrained=/nonexistent/hf"},
                 "error: command line: model.init_args.pretrained: no such directory: /nonexistent/hf\n");
}

// The same config runs from any folder: its corpus is found beside it, and
// a run records the path it read, relative to where it ran.
TEST_F(ConfigPathsTest, AConfigsOwnFilesAreFoundFromAnyFolder) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "a tiny corpus for a tiny model. ";
  write("sub/corpus.txt", text);
  write("sub/cfg.yaml",
        std::string("trainer: {devices: 1, max_steps: 1, limit_val_batches: 1, log_every_n_steps: 1, "
                    "enable_progress_bar: false, enable_model_summary: false}\nmodel:\n") +
            kTinyLlama + "data:\n  class_path: TextDataModule\n  init_args: {path: corpus.txt, block_size: 8}\n");
  const RunResult r = run({"fit", "-c", "sub/cfg.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(read("lightning_logs/version_0/config.yaml"), HasSubstr("path: sub/corpus.txt\n"));
  // The saved config runs again: its path, relative to the working
  // directory, is not beside it, and the note says where it was read.
  const RunResult again = run({"fit", "-c", "lightning_logs/version_0/config.yaml"});
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_THAT(again.err, HasSubstr("warning: lightning_logs/version_0/config.yaml:"));
  EXPECT_THAT(again.err, HasSubstr(": data.init_args.path: sub/corpus.txt is not in the config file's folder (" +
                                   (dir() / "lightning_logs/version_0").string() +
                                   "); read from the working directory: " + (dir() / "sub/corpus.txt").string() +
                                   "\n"));
}

// Values that are not paths stay as they are: a tokenizer's name,
// ckpt_path's last, a chat template's own text.
TEST_F(ConfigPathsTest, WordsAndTextsAreNotPaths) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "a tiny corpus for a tiny model. ";
  write("sub/corpus.txt", text);
  write("sub/cfg.yaml",
        std::string("trainer: {devices: 1, max_steps: 1, limit_val_batches: 1, log_every_n_steps: 1, "
                    "enable_progress_bar: false, enable_model_summary: false}\nmodel:\n") +
            kTinyLlama +
            "data:\n  class_path: TextDataModule\n  init_args: {path: corpus.txt, tokenizer: char, block_size: 8}\n"
            "ckpt_path: last\n");
  const RunResult r = run({"fit", "-c", "sub/cfg.yaml"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "warning: ckpt_path=last: no last.ckpt under ./lightning_logs, so no checkpoint is loaded "
                   "(ModelCheckpoint writes one with save_last: true)\n");
  fs::remove_all(dir() / "lightning_logs");
  write("sub/train.jsonl", "{\"prompt\": \"hi\", \"completion\": \" there\"}\n");
  write("sub/cfg.yaml",
        std::string("model:\n") + kTinyLlama +
            "data:\n  class_path: InstructionDataModule\n"
            "  init_args:\n    train_file: train.jsonl\n    tokenizer: tok\n"
            "    chat_template: \"{% for m in messages %}{{ m['content'] }}{% endfor %}\"\n");
  expectRejected({"fit", "-c", "sub/cfg.yaml"}, missing("9:16", "data.init_args.tokenizer", "file or directory", "tok"));
}

}  // namespace
}  // namespace hpu::cli::testing
