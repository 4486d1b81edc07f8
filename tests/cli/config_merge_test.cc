// Config merge order through the binary: -c files left to right, flags over
// files wherever they stand, a class change dropping the earlier init_args
// while the same class keeps them, and options before the subcommand.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

class ConfigMergeTest : public HpuTrainTest {
 protected:
  void SetUp() override {
    write("a.yaml",
          "seed_everything: 1\n"
          "trainer:\n"
          "  devices: 1\n"
          "  max_epochs: 3\n"
          "  log_every_n_steps: 7\n"
          "model:\n"
          "  class_path: MLPClassifier\n"
          "  init_args:\n"
          "    hidden: [64]\n"
          "    dropout: 0.5\n"
          "data: RandomDataModule\n");
    write("b.yaml",
          "trainer:\n"
          "  max_epochs: 4\n"
          "model:\n"
          "  class_path: BoringModel\n"
          "  init_args:\n"
          "    lr: 0.5\n");
    write("same_class.yaml",
          "model:\n"
          "  class_path: MLPClassifier\n"
          "  init_args:\n"
          "    lr: 0.01\n");
    write("init_args_only.yaml",
          "model:\n"
          "  init_args:\n"
          "    dropout: 0.1\n"
          "  activation: tanh\n");  // shorthand beside init_args
  }
  YAML::Node resolved(const std::vector<std::string>& args) { return YAML::Load(printConfig(args)); }
};

TEST_F(ConfigMergeTest, LaterFilesOverrideEarlierOnesKeyByKey) {
  YAML::Node cfg = resolved({"-c", "a.yaml", "-c", "b.yaml"});
  EXPECT_EQ(cfg["trainer"]["max_epochs"].Scalar(), "4");         // b
  EXPECT_EQ(cfg["trainer"]["log_every_n_steps"].Scalar(), "7");  // a, untouched by b
  EXPECT_EQ(cfg["seed_everything"].Scalar(), "1");
  cfg = resolved({"--config", "b.yaml", "--config=a.yaml"});
  EXPECT_EQ(cfg["trainer"]["max_epochs"].Scalar(), "3");  // now a is last
  EXPECT_EQ(cfg["model"]["class_path"].Scalar(), "MLPClassifier");
}

TEST_F(ConfigMergeTest, FlagsOverrideEveryConfigWhereverTheyStand) {
  EXPECT_EQ(resolved({"-c", "a.yaml", "-c", "b.yaml", "--trainer.max_epochs=9"})["trainer"]["max_epochs"].Scalar(),
            "9");
  // Precedence is by source, not position: the command line beats files.
  EXPECT_EQ(resolved({"--trainer.max_epochs=9", "-c", "a.yaml", "-c", "b.yaml"})["trainer"]["max_epochs"].Scalar(),
            "9");
  // Between flags, the later one wins.
  EXPECT_EQ(
      resolved({"-c", "a.yaml", "--trainer.max_epochs=9", "--trainer.max_epochs=2"})["trainer"]["max_epochs"].Scalar(),
      "2");
}

TEST_F(ConfigMergeTest, AnotherClassDropsTheEarlierInitArgs) {
  YAML::Node model = resolved({"-c", "a.yaml", "-c", "b.yaml"})["model"];
  EXPECT_EQ(model["class_path"].Scalar(), "lightning.pytorch.demos.boring_classes.BoringModel");
  EXPECT_EQ(model["init_args"]["lr"].Scalar(), "0.5");
  EXPECT_FALSE(model["init_args"]["out_features"].IsDefined());  // hpu-train's own, at its default: not printed
  EXPECT_FALSE(model["init_args"]["hidden"].IsDefined());
  EXPECT_FALSE(model["init_args"]["dropout"].IsDefined());
  // Back to MLPClassifier: it starts again from its own defaults, not from a.yaml.
  model = resolved({"-c", "a.yaml", "-c", "b.yaml", "-c", "same_class.yaml"})["model"];
  EXPECT_EQ(model["class_path"].Scalar(), "MLPClassifier");
  EXPECT_EQ(model["init_args"]["dropout"].Scalar(), "0.2");
  EXPECT_EQ(model["init_args"]["lr"].Scalar(), "0.01");
}

TEST_F(ConfigMergeTest, TheSameClassKeepsTheEarlierInitArgs) {
  YAML::Node args = resolved({"-c", "a.yaml", "-c", "same_class.yaml"})["model"]["init_args"];
  EXPECT_EQ(args["hidden"].size(), 1u);
  EXPECT_EQ(args["hidden"][0].Scalar(), "64");
  EXPECT_EQ(args["dropout"].Scalar(), "0.5");
  EXPECT_EQ(args["lr"].Scalar(), "0.01");
  // init_args without a class_path refine whatever class is there.
  args = resolved({"-c", "a.yaml", "-c", "init_args_only.yaml"})["model"]["init_args"];
  EXPECT_EQ(args["hidden"][0].Scalar(), "64");
  EXPECT_EQ(args["dropout"].Scalar(), "0.1");
  EXPECT_EQ(args["activation"].Scalar(), "tanh");
}

TEST_F(ConfigMergeTest, ClassOnTheCommandLineFollowsTheSameRule) {
  YAML::Node args = resolved({"-c", "a.yaml", "--model", "MLPClassifier"})["model"]["init_args"];
  EXPECT_EQ(args["dropout"].Scalar(), "0.5");  // same class: kept
  args = resolved({"-c", "a.yaml", "--model=BoringModel"})["model"]["init_args"];
  EXPECT_FALSE(args["dropout"].IsDefined());  // another class: dropped
  EXPECT_FALSE(args["lr"].IsDefined());       // BoringModel's own lr, at its default (not a.yaml's): not printed
  // The dotted spelling of the class is the same assignment.
  args = resolved({"-c", "a.yaml", "--model.class_path=MLPClassifier"})["model"]["init_args"];
  EXPECT_EQ(args["dropout"].Scalar(), "0.5");
  YAML::Node model = resolved({"-c", "a.yaml", "--model.class_path", "BoringModel", "--model.lr=0.3"})["model"];
  EXPECT_EQ(model["class_path"].Scalar(), "lightning.pytorch.demos.boring_classes.BoringModel");
  EXPECT_FALSE(model["init_args"]["dropout"].IsDefined());
  EXPECT_EQ(model["init_args"]["lr"].Scalar(), "0.3");
}

TEST_F(ConfigMergeTest, OptionsBeforeTheSubcommandAreAccepted) {
  const RunResult before = run({"-c", "a.yaml", "fit", "--print_config"});
  ASSERT_EQ(before.exit_code, 0) << before.describe();
  EXPECT_EQ(before.out, printConfig({"-c", "a.yaml"}));
  // Files before the subcommand come first, then those after it.
  const RunResult split = run({"-c", "a.yaml", "fit", "-c", "b.yaml", "--print_config"});
  ASSERT_EQ(split.exit_code, 0) << split.describe();
  EXPECT_EQ(split.out, printConfig({"-c", "a.yaml", "-c", "b.yaml"}));
  const RunResult flags = run({"--print_config=skip_default", "--trainer.max_epochs=8", "fit", "-c", "a.yaml"});
  ASSERT_EQ(flags.exit_code, 0) << flags.describe();
  EXPECT_EQ(flags.out, printConfig({"-c", "a.yaml", "--trainer.max_epochs=8"}, "skip_default"));
}

// Feeds `text` into the FIFO at `path` once a reader opens it, giving up after
// `patience` so that a reader that never comes cannot hang the test.
void feedFifo(const std::filesystem::path& path, const std::string& text, std::chrono::seconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  int fd = -1;
  while ((fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0 && errno == ENXIO &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (fd < 0) return;
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
}

TEST_F(ConfigMergeTest, ConfigMayComeFromAPipe) {
  // As with --config <(generate-config): no size to ask for, read to the end.
  ASSERT_EQ(::mkfifo((dir() / "pipe.yaml").c_str(), 0600), 0);
  std::thread writer(feedFifo, dir() / "pipe.yaml", "trainer:\n  max_epochs: 6\n", std::chrono::seconds(20));
  const RunResult r = run({"fit", "-c", "a.yaml", "-c", "pipe.yaml", "--print_config"});
  writer.join();
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(YAML::Load(r.out)["trainer"]["max_epochs"].Scalar(), "6");
}

}  // namespace
}  // namespace hpu::cli::testing
