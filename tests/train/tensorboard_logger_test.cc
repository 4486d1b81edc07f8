// TensorBoardLogger, read as TensorBoard reads it: the event file's TFRecord
// framing and masked CRC-32Cs checked here, every record decoded by
// `protoc --decode` with the project's .proto files, and the scalars
// compared with metrics.csv, which the default CSVLogger writes beside them.
#include <gmock/gmock.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <regex>
#include <tuple>

#include "hpu/core/base/crc32c.h"
#include "train_support.h"

namespace hpu::cli::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

std::uint64_t littleEndian(const std::string& bytes, std::size_t at, int width) {
  std::uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  return v;
}

// The records of a TFRecord file. Fails the test on a bad length or CRC.
std::vector<std::string> readTfRecords(const fs::path& path) {
  const std::string file = readFile(path);
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size()) << "a truncated record header at byte " << at;
    if (at + 12 > file.size()) break;
    const std::uint64_t length = littleEndian(file, at, 8);
    EXPECT_EQ(littleEndian(file, at + 8, 4), core::maskCrc32c(core::crc32c(file.substr(at, 8)))) << "at " << at;
    EXPECT_LE(at + 12 + length + 4, file.size()) << "a truncated record at byte " << at;
    if (at + 12 + length + 4 > file.size()) break;
    std::string data = file.substr(at + 12, length);
    EXPECT_EQ(littleEndian(file, at + 12 + length, 4), core::maskCrc32c(core::crc32c(data))) << "at " << at;
    records.push_back(std::move(data));
    at += 12 + length + 4;
  }
  return records;
}

// Undoes the C escapes of protobuf's text format (\n, \", \\, \ooo ...).
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    if (c >= '0' && c <= '7') {
      out += static_cast<char>(std::stoi(s.substr(i, 3), nullptr, 8));
      i += 2;
    } else {
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    }
  }
  return out;
}

// The quoted value of the first `field: "..."` line in protobuf text.
std::string quotedField(const std::string& text, const std::string& field) {
  std::smatch m;
  const std::regex re(field + R"re(: "((?:[^"\\]|\\.)*)")re");
  if (!std::regex_search(text, m, re)) return "";
  return unescape(m[1]);
}

using TensorBoardLoggerTest = FashionRunTest;

class ProtocDecoder {
 public:
  explicit ProtocDecoder(fs::path scratch) : scratch_(std::move(scratch)) {}

  // `protoc --decode=<type>` of `bytes`, with the project's TensorBoard protos.
  std::string decode(const std::string& type, const std::string& proto, const std::string& bytes) {
    const fs::path in = scratch_ / "record.bin";
    writeFile(in, bytes);
    const std::string command = "exec /usr/bin/protoc --decode=" + type + " -I '" +
                                sourcePath("core/loggers/proto").string() + "' " + proto + " < '" + in.string() + "'";
    const RunResult r = runProgram("/bin/sh", {"-c", command}, {.cwd = scratch_, .env = {}});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return r.out;
  }

 private:
  fs::path scratch_;
};

TEST_F(TensorBoardLoggerTest, DefaultLoggersWriteAnEventFileThatMatchesMetricsCsv) {
  const RunResult fit = run({"fit", "-c", fashionConfig(), "--trainer.max_epochs=2"});
  ASSERT_EQ(fit.exit_code, 0) << fit.describe();
  const fs::path version = dir() / "lightning_logs/version_0";
  std::vector<std::string> events;
  for (const std::string& name : fileNames(version))
    if (name.starts_with("events.out.tfevents.")) events.push_back(name);
  ASSERT_EQ(events.size(), 1u) << "files: " << ::testing::PrintToString(fileNames(version));
  EXPECT_TRUE(std::regex_match(events[0], std::regex(R"(events\.out\.tfevents\.[0-9]{10}\..+\.[0-9]+\.[0-9]+)")))
      << events[0];
  EXPECT_THAT(fileNames(version), ElementsAre("config.yaml", events[0], "hparams.yaml", "metrics.csv"));

  ProtocDecoder protoc(dir());
  const std::vector<std::string> records = readTfRecords(version / events[0]);
  ASSERT_GE(records.size(), 2u);
  std::vector<std::string> decoded;
  for (const std::string& r : records) decoded.push_back(protoc.decode("tensorboard.Event", "tensorboard/event.proto", r));
  EXPECT_THAT(decoded[0], HasSubstr("file_version: \"brain.Event:2\""));
  // A run opens with SessionLog START at step 0, as TensorFlow's sessions do.
  EXPECT_THAT(decoded[1], HasSubstr("session_log {\n  status: START\n}"));
  EXPECT_THAT(decoded[1], Not(HasSubstr("step:")));

  // Every scalar as (tag, step, value); the other summaries by tag.
  using Scalar = std::tuple<std::string, std::int64_t, float>;
  std::vector<Scalar> scalars;
  std::map<std::string, std::string> plugin_summaries;
  std::vector<std::string> plugin_order;
  for (std::size_t i = 2; i < decoded.size(); ++i) {
    const std::string& e = decoded[i];
    std::smatch step, value;
    const std::int64_t s =
        std::regex_search(e, step, std::regex(R"(\nstep: ([0-9]+))")) ? std::stoll(step[1]) : 0;
    const std::string tag = quotedField(e, "tag");
    if (std::regex_search(e, value, std::regex(R"(simple_value: (\S+))"))) {
      scalars.emplace_back(tag, s, std::stof(value[1]));
    } else {
      plugin_summaries[tag] = e;
      plugin_order.push_back(tag);
    }
  }

  // The scalars are metrics.csv's cells, as float32, and hp_metric = -1 at step 0.
  // A cell is the shortest text of a double, so it is read as that double and
  // then rounded to float32, as the logger rounds the value it has (parsing
  // the text straight to float rounds once from the decimal, which differs
  // where the double lies next to a halfway point between two floats).
  const CsvTable m = metrics();
  const std::vector<std::string> steps = m.column("step");
  std::vector<Scalar> cells{{"hp_metric", 0, -1.0f}};
  for (std::size_t col = 0; col < m.header.size(); ++col)
    for (std::size_t row = 0; row < m.rows.size(); ++row)
      if (m.header[col] != "step" && !m.rows[row][col].empty())
        cells.emplace_back(m.header[col], std::stoll(steps[row]), static_cast<float>(std::stod(m.rows[row][col])));
  // A value logged again at its step (epoch, in the training and the
  // validation rows of step 3) is one scalar: TensorBoard shows each step once.
  std::sort(scalars.begin(), scalars.end());
  std::sort(cells.begin(), cells.end());
  cells.erase(std::unique(cells.begin(), cells.end()), cells.end());
  EXPECT_EQ(scalars, cells);
  EXPECT_EQ(std::count_if(cells.begin(), cells.end(), [](const Scalar& c) { return std::get<0>(c) == "val_acc"; }), 2);

  // The hparams plugin's three summaries, and the config as text.
  EXPECT_THAT(plugin_order, ElementsAre("config/text_summary", "_hparams_/experiment", "_hparams_/session_start_info",
                                        "_hparams_/session_end_info"));
  const auto hparams = [&](const std::string& tag) {
    EXPECT_EQ(quotedField(plugin_summaries[tag], "plugin_name"), "hparams");
    return protoc.decode("tensorboard.hparams.HParamsPluginData", "tensorboard/hparams.proto",
                         quotedField(plugin_summaries[tag], "content"));
  };
  const std::string start = hparams("_hparams_/session_start_info");
  EXPECT_THAT(start, HasSubstr("key: \"hidden\"\n    value {\n      string_value: \"[32]\"\n"));
  EXPECT_THAT(start, HasSubstr("key: \"activation\"\n    value {\n      string_value: \"relu\"\n"));
  EXPECT_THAT(start, HasSubstr("key: \"dropout\"\n    value {\n      number_value: 0.2\n"));
  const std::string experiment = hparams("_hparams_/experiment");
  EXPECT_THAT(experiment, HasSubstr("hparam_infos {\n    name: \"lr\"\n    type: DATA_TYPE_FLOAT64\n  }"));
  EXPECT_THAT(experiment, HasSubstr("metric_infos {\n    name {\n      tag: \"hp_metric\"\n    }\n  }"));
  EXPECT_THAT(hparams("_hparams_/session_end_info"), HasSubstr("status: STATUS_SUCCESS"));

  const std::string& text = plugin_summaries["config/text_summary"];
  EXPECT_EQ(quotedField(text, "plugin_name"), "text");
  EXPECT_THAT(text, HasSubstr("dtype: DT_STRING"));
  EXPECT_THAT(text, HasSubstr("tensor_shape {\n        dim {\n          size: 1\n"));
  const std::string yaml = quotedField(text, "string_val");
  EXPECT_TRUE(yaml.starts_with("```yaml\nseed_everything: 7\n")) << yaml;
  EXPECT_THAT(yaml, HasSubstr("  max_epochs: 2\n"));
}

using TensorBoardLoggerOptionsTest = TrainRunTest;

TEST_F(TensorBoardLoggerOptionsTest, SubDirPrefixAndNoHpMetric) {
  fitBoring({"--trainer.max_epochs=1", "--trainer.log_every_n_steps=16", "--trainer.logger=TensorBoardLogger",
             "--trainer.logger.save_dir=tb", "--trainer.logger.sub_dir=train", "--trainer.logger.prefix=p",
             "--trainer.logger.default_hp_metric=false", "--trainer.logger.filename_suffix=.x"});
  // The run's log_dir is the logger's: checkpoints and config.yaml land in sub_dir.
  const std::vector<std::string> files = fileNames(dir() / "tb/lightning_logs/version_0/train");
  ASSERT_EQ(files.size(), 3u) << ::testing::PrintToString(files);
  EXPECT_EQ(files[0], "config.yaml");
  EXPECT_TRUE(files[1].starts_with("events.out.tfevents.") && files[1].ends_with(".x")) << files[1];
  EXPECT_EQ(files[2], "hparams.yaml");
  EXPECT_TRUE(fs::exists(dir() / "tb/lightning_logs/version_0/train/checkpoints/epoch=0-step=32.ckpt"));
  ProtocDecoder protoc(dir());
  std::vector<std::string> tags;
  for (const std::string& r : readTfRecords(dir() / "tb/lightning_logs/version_0/train" / files[1])) {
    const std::string tag = quotedField(protoc.decode("tensorboard.Event", "tensorboard/event.proto", r), "tag");
    if (!tag.empty()) tags.push_back(tag);
  }
  // No hparams summaries without a metric; every scalar prefixed ("-" as Lightning joins);
  // epoch once at step 31, where the training and the validation metrics both bring it.
  EXPECT_THAT(tags, ElementsAre("config/text_summary", "p-epoch", "p-train_loss", "p-epoch", "p-train_loss",
                                "p-val_loss"));
}

// An elastic restart continues version_0 in a second event file: named to
// sort after the first (TensorBoard reads a run's files in name order), it
// opens with SessionLog START at the resumed step, which is Event field 7 as
// TensorBoard numbers it (tests/interop has TensorBoard itself read it), and
// it holds nothing below that step: the first file's hp_metric, hparams and
// config stand, so every (tag, step) TensorBoard keeps is there once.
TEST_F(TensorBoardLoggerOptionsTest, AnElasticRestartContinuesInAFileThatSortsLastAndStartsAtTheResumedStep) {
  write("elastic.yaml", R"(trainer:
  max_epochs: 2
  log_every_n_steps: 1
  callbacks:
    - {class_path: ModelCheckpoint, init_args: {every_n_train_steps: 10, save_last: true}}
)");
  env()["HPU_RESTART_BACKOFF"] = "10ms";
  env()["HPU_FAULT"] = "crash,rank=0,step=29,restart=0";
  fitBoring({"-c", "elastic.yaml", "--trainer.max_restarts=1"});
  const fs::path version = dir() / "lightning_logs/version_0";
  std::vector<std::string> events;
  for (const std::string& name : fileNames(version))
    if (name.starts_with("events.out.tfevents.")) events.push_back(name);
  ASSERT_EQ(events.size(), 2u) << ::testing::PrintToString(fileNames(version));
  const std::vector<std::string> first = readTfRecords(version / events[0]);
  const std::vector<std::string> second = readTfRecords(version / events[1]);
  ASSERT_GE(first.size(), 2u);
  ASSERT_GE(second.size(), 2u);
  // The wire bytes, not our .proto: wall_time (field 1, 0x09 and 8 bytes),
  // step (field 2, 0x10, absent at 0), session_log (field 7, 0x3a, 2 bytes:
  // status = START).
  ASSERT_EQ(first[1].size(), 13u) << ::testing::PrintToString(first[1]);
  EXPECT_EQ(first[1].substr(9), std::string("\x3a\x02\x08\x01", 4));
  ASSERT_EQ(second[1].size(), 15u) << ::testing::PrintToString(second[1]);
  EXPECT_EQ(second[1].substr(9), std::string("\x10\x14\x3a\x02\x08\x01", 6)) << "START at step 20";

  ProtocDecoder protoc(dir());
  std::vector<std::pair<std::string, std::int64_t>> kept;  // (tag, step) as TensorBoard keeps them
  for (const auto* records : {&first, &second})
    for (std::size_t i = 1; i < records->size(); ++i) {
      const std::string e = protoc.decode("tensorboard.Event", "tensorboard/event.proto", (*records)[i]);
      std::smatch m;
      const std::int64_t step = std::regex_search(e, m, std::regex(R"(\nstep: ([0-9]+))")) ? std::stoll(m[1]) : 0;
      if (records == &second) {
        EXPECT_GE(step, 20) << e;
      }
      const std::string tag = quotedField(e, "tag");
      if (tag.empty()) continue;  // the STARTs
      if (records == &first && step >= 20) continue;  // redone after the restart
      kept.emplace_back(tag, step);
    }
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(std::adjacent_find(kept.begin(), kept.end()), kept.end()) << ::testing::PrintToString(kept);
  EXPECT_EQ(std::count(kept.begin(), kept.end(), std::pair<std::string, std::int64_t>{"hp_metric", 0}), 1);
  EXPECT_EQ(std::count_if(kept.begin(), kept.end(), [](const auto& k) { return k.first == "train_loss"; }), 64);
}

// A new event file's name sorts after the files already in its folder, even
// one stamped later (another host's clock, or a pid with more digits in the
// same second).
TEST_F(TensorBoardLoggerOptionsTest, ANewEventFileSortsAfterTheFilesAlreadyInItsFolder) {
  fs::create_directories(dir() / "tb/lightning_logs/version_0");
  writeFile(dir() / "tb/lightning_logs/version_0/events.out.tfevents.4000000000.zz.1.0", "");
  fitBoring({"--trainer.max_epochs=1", "--trainer.logger=TensorBoardLogger", "--trainer.logger.save_dir=tb",
             "--trainer.logger.version=0"});
  const std::vector<std::string> files = fileNames(dir() / "tb/lightning_logs/version_0");
  ASSERT_EQ(files.size(), 4u) << ::testing::PrintToString(files);
  EXPECT_EQ(files[1], "events.out.tfevents.4000000000.zz.1.0");
  EXPECT_TRUE(files[2].starts_with("events.out.tfevents.4000000001.")) << files[2];
}

TEST_F(TensorBoardLoggerOptionsTest, LogGraphIsRefusedByName) {
  const RunResult r = boring("fit", {"--trainer.logger=TensorBoardLogger", "--trainer.logger.log_graph=true"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("trainer.logger.init_args.log_graph"));
}

}  // namespace
}  // namespace hpu::cli::testing
