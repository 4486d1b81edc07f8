// The config system: strict YAML loading, validation messages, schema-aware
// merging and overrides, canonical printing. Components registered here are
// test-only; they exercise the same registration path built-ins use.
#include <gtest/gtest.h>

#include <fstream>

#include "hpu/core/config/compose.h"
#include "hpu/core/config/normalize.h"
#include "hpu/core/config/print.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/config/yaml_io.h"
#include "hpu/core/base/errors.h"

namespace hpu::core::config {
namespace {

struct Widget {
  virtual ~Widget() = default;
  double lr = 0;
  std::vector<std::int64_t> hidden;
};

HPU_REGISTER_COMPONENT(Widget,
                       ComponentSchema{ComponentKind::kModel,
                                       "TestNet",
                                       "pytorch_lightning.demos",
                                       {"TestNet",
                                        "",
                                        {{"lr", Type::real().min(0.0, true), "0.1", "Learning rate."},
                                         {"hidden", Type::list(Type::integer().min(1)), "[8, 4]", "Widths."},
                                         {"act", Type::string({"relu", "tanh"}), "relu", "Activation."}}},
                                       "A test network."},
                       [](const Params& p) {
                         auto w = std::make_unique<Widget>();
                         w->lr = p.getFloat("lr");
                         w->hidden = p.getIntList("hidden");
                         return w;
                       });
HPU_REGISTER_COMPONENT(Widget,
                       ComponentSchema{ComponentKind::kModel,
                                       "OtherNet",
                                       "",
                                       {"OtherNet", "", {{"depth", Type::integer(), "2", "Depth."}}},
                                       "Another test network."},
                       [](const Params&) { return std::make_unique<Widget>(); });

const StructSchema& testSchema() {
  static const StructSchema s{
      "",
      "",
      {{"epochs", Type::integer().min(0), "3", "Epochs."},
       {"seed", Type::anyOf({Type::boolean(), Type::integer()}), "true", "Seed."},
       {"devices", Type::anyOf({Type::integer(), Type::string({"auto"}), Type::list(Type::integer())}), "auto",
        "Devices."},
       {"model", Type::component({ComponentKind::kModel}), "null", "Model."},
       {"nets", Type::optional(Type::list(Type::component({ComponentKind::kModel}))), "null", "Nets."},
       {"legacy", Type::boolean(), "false", "Compat.", "the legacy path is gone"}}};
  return s;
}
const Type& testType() {
  static const Type t = Type::structure(&testSchema());
  return t;
}

std::vector<std::string> problemsOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

Node yaml(const std::string& text) { return loadYamlString(text, "t.yaml"); }

Node compose(const std::string& text, std::vector<Override> overrides = {}) {
  Node root = yaml(text);
  std::vector<std::string> problems;
  for (const Override& o : overrides) applyOverride(root, testType(), o, problems);
  Node out = normalize(root, testType(), "", problems);
  if (!problems.empty()) throw ConfigError(problems);
  return out;
}

Override ov(const std::string& path, const std::string& value, bool append = false) {
  return {path, loadYamlString(value, "command line"), append};
}

TEST(Yaml, DuplicateKeysAreReportedWithBothPositions) {
  auto p = problemsOf([] { yaml("a: 1\nb:\n  c: 2\n  c: 3\na: 4\n"); });
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0], "t.yaml:4:3: b.c: duplicate key (first defined at t.yaml:3:6)");
  EXPECT_EQ(p[1], "t.yaml:5:1: a: duplicate key (first defined at t.yaml:1:4)");
}

TEST(Yaml, SyntaxErrorNamesFileLineColumn) {
  auto p = problemsOf([] { yaml("a: [1, 2\nb: 3\n"); });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].rfind("t.yaml:", 0), 0u) << p[0];
  EXPECT_NE(p[0].find("invalid YAML"), std::string::npos) << p[0];
}

TEST(Yaml, DepthAndSizeAreCapped) {
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "[";
  auto p = problemsOf([&] { loadYamlString(deep + "1" + std::string(70, ']'), "d.yaml"); });
  ASSERT_FALSE(p.empty());
  EXPECT_NE(p[0].find("nesting deeper than 64 levels"), std::string::npos) << p[0];
  LoadLimits small;
  small.max_bytes = 10;
  p = problemsOf([&] { loadYamlString("a: 123456789012", "s.yaml", small); });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "s.yaml: value is 15 bytes; the limit is 10");
}

TEST(Yaml, MissingFileNamesIt) {
  auto p = problemsOf([] { loadYamlFile("/nonexistent/x.yaml"); });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "cannot read config file '/nonexistent/x.yaml': No such file or directory");
}

TEST(Yaml, QuotedScalarsStayStrings) {
  Node n = yaml("a: null\nb: 'null'\nc: ~\n");
  EXPECT_TRUE(n.find("a")->isNull());
  EXPECT_TRUE(n.find("b")->isScalar());
  EXPECT_TRUE(n.find("b")->quoted());
  EXPECT_TRUE(n.find("c")->isNull());
}

TEST(Validate, WrongTypeRangeNanAndUnknownKey) {
  auto p = problemsOf([] {
    compose("epochs: -1\nmodel:\n  class_path: TestNet\n  init_args:\n    lr: abc\n    hiden: [1]\n"
            "    act: relux\nepoch: 3\n");
  });
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0], "t.yaml:8:8: epoch: unknown key; did you mean 'epochs'?");
  EXPECT_EQ(p[1], "t.yaml:1:9: epochs: -1 is out of range; must be >= 0");
  EXPECT_EQ(p[2], "t.yaml:6:12: model.init_args.hiden: unknown key; did you mean 'hidden'?");
  EXPECT_EQ(p[3], "t.yaml:5:9: model.init_args.lr: expected float, got 'abc'");
  EXPECT_EQ(p[4], "t.yaml:7:10: model.init_args.act: 'relux' is not one of relu, tanh; did you mean 'relu'?");
  p = problemsOf([] { compose("model: {class_path: TestNet, init_args: {lr: .nan}}"); });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "t.yaml:1:46: model.init_args.lr: expected a finite float, got '.nan'");
  p = problemsOf([] { compose("model: {class_path: TestNet, init_args: {lr: 0}}"); });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], "t.yaml:1:46: model.init_args.lr: 0 is out of range; must be > 0");
}

TEST(Validate, UnknownClassSuggestsAndRequiredKeyIsNamed) {
  auto p = problemsOf([] { compose("model: TestNett"); });
  ASSERT_EQ(p.size(), 1u);
  // The built-in models are registered too, in the same list.
  EXPECT_EQ(p[0],
            "t.yaml:1:8: model: unknown Model class 'TestNett'; did you mean 'pytorch_lightning.demos.TestNet'?");
  p = problemsOf([] { compose("epochs: 1"); });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0],
            "t.yaml:1:1: model: missing required key; choose a Model class (registered: AutoModelForCausalLM, BoringModel, "
            "ConvNetClassifier, GPT2LMHeadModel, Gemma2ForCausalLM, GemmaForCausalLM, LlamaForCausalLM, MLPClassifier, "
            "MixtralForCausalLM, OtherNet, Phi3ForCausalLM, Qwen2ForCausalLM, Sequential, TestNet)");
}

TEST(Validate, CompatibilityKeysAcceptOnlyTheirDefault) {
  EXPECT_NO_THROW(compose("model: TestNet\nlegacy: false"));
  auto p = problemsOf([] { compose("model: TestNet\nlegacy: true"); });
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0],
            "t.yaml:2:9: legacy: only the default (false) is supported: the legacy path is gone");
}

TEST(Validate, CanonicalFormFillsDefaultsAndResolvesAliases) {
  Node n = compose("model: lightning.pytorch.models.TestNet\nseed: yes\ndevices: [0, 1]");
  EXPECT_EQ(n.find("epochs")->str(), "3");
  EXPECT_EQ(n.find("seed")->str(), "true");
  EXPECT_EQ(n.find("devices")->items().size(), 2u);
  const Node* m = n.find("model");
  EXPECT_EQ(m->find("class_path")->str(), "pytorch_lightning.demos.TestNet");
  EXPECT_EQ(m->find("init_args")->find("lr")->str(), "0.1");
  EXPECT_EQ(m->find("init_args")->find("hidden")->items()[1].str(), "4");
}

// LightningCLI prints a class defined in the script it ran as
// __main__.<Class> (a Python mirror of MLPClassifier): it resolves by name.
TEST(Validate, ClassOfTheScriptLightningCliRanResolvesByName) {
  Node n = compose("model: {class_path: __main__.OtherNet, init_args: {depth: 3}}");
  EXPECT_EQ(n.find("model")->find("class_path")->str(), "OtherNet");
  EXPECT_EQ(n.find("model")->find("init_args")->find("depth")->str(), "3");
  const ComponentKind models[] = {ComponentKind::kModel};
  const Resolution mlp = SchemaRegistry::instance().resolve(models, "__main__.MLPClassifier");
  ASSERT_NE(mlp.schema, nullptr);
  EXPECT_EQ(mlp.schema->name, "MLPClassifier");
  EXPECT_TRUE(underClassPathPackage("__main__"));
  EXPECT_FALSE(underClassPathPackage("__main___helpers"));
  EXPECT_EQ(SchemaRegistry::instance().resolve(models, "__main__.NoSuchNet").schema, nullptr);
}

TEST(Overrides, EveryForm) {
  Node n = compose("model: TestNet",
                   {ov("epochs", "5"), ov("model.lr", "0.5"), ov("model.init_args.hidden", "[3, 2, 1]"),
                    ov("devices", "[0, 1]"), ov("nets", "TestNet", true), ov("nets", "OtherNet", true),
                    ov("nets.depth", "7"), ov("nets.0.lr", "0.25"), ov("seed", "no")});
  EXPECT_EQ(n.find("epochs")->str(), "5");
  EXPECT_EQ(n.find("seed")->str(), "false");
  const Node& args = *n.find("model")->find("init_args");
  EXPECT_EQ(args.find("lr")->str(), "0.5");
  EXPECT_EQ(args.find("hidden")->items().size(), 3u);
  const auto& nets = n.find("nets")->items();
  ASSERT_EQ(nets.size(), 2u);
  EXPECT_EQ(nets[0].find("init_args")->find("lr")->str(), "0.25");
  EXPECT_EQ(nets[1].find("class_path")->str(), "OtherNet");
  EXPECT_EQ(nets[1].find("init_args")->find("depth")->str(), "7");
}

TEST(Overrides, SameClassKeepsInitArgsOtherClassDropsThem) {
  Node n = compose("model: {class_path: TestNet, init_args: {lr: 0.5}}", {ov("model", "TestNet")});
  EXPECT_EQ(n.find("model")->find("init_args")->find("lr")->str(), "0.5");
  n = compose("model: {class_path: TestNet, init_args: {lr: 0.5}}", {ov("model", "OtherNet")});
  EXPECT_EQ(n.find("model")->find("class_path")->str(), "OtherNet");
  EXPECT_EQ(n.find("model")->find("init_args")->find("depth")->str(), "2");
}

TEST(Overrides, KeyForAnEmptyListIsAnError) {
  Node root = yaml("model: TestNet");
  std::vector<std::string> problems;
  applyOverride(root, testType(), ov("nets.depth", "3"), problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "command line:1:1: nets.depth: the list is empty; add an item first with --nets+=<ClassName>");
}

TEST(Merge, FilesMergeLeftToRightAndClassChangeResets) {
  Node base = yaml("epochs: 1\nmodel: {class_path: TestNet, init_args: {lr: 0.5, act: tanh}}");
  mergeInto(base, yaml("model: {init_args: {lr: 0.7}}\nepochs: 2"), testType());
  std::vector<std::string> problems;
  Node n = normalize(base, testType(), "", problems);
  ASSERT_TRUE(problems.empty());
  EXPECT_EQ(n.find("epochs")->str(), "2");
  EXPECT_EQ(n.find("model")->find("init_args")->find("lr")->str(), "0.7");
  EXPECT_EQ(n.find("model")->find("init_args")->find("act")->str(), "tanh");
}

// A list or an init_args that is not a mapping, given for a component over
// one already set, is refused by name (it once dereferenced a missing
// init_args: `--model '[RMSNorm]'` crashed; found by fuzz_config).
TEST(Merge, AComponentOverwrittenByAListOrWithScalarInitArgsIsNamed) {
  EXPECT_EQ(problemsOf([] { compose("model: TestNet", {ov("model", "[TestNet]")}); }),
            std::vector<std::string>{
                "command line:1:1: model: expected a Model class name or {class_path, init_args}, got a list"});
  EXPECT_EQ(problemsOf([] { compose("model: {class_path: TestNet, init_args: 5}", {ov("model.lr", "0.5")}); }),
            (std::vector<std::string>{"command line:1:1: model.lr: cannot set a key inside init_args, which holds 5",
                                      "t.yaml:1:41: model.init_args: expected a mapping, got '5'"}));
  const auto mergedProblems = [](const char* overlay) {
    Node base = yaml("model: {class_path: TestNet, init_args: {lr: 0.5}}");
    mergeInto(base, yaml(overlay), testType());
    std::vector<std::string> problems;
    normalize(base, testType(), "", problems);
    return problems;
  };
  EXPECT_EQ(mergedProblems("model: [TestNet]"),
            std::vector<std::string>{
                "t.yaml:1:8: model: expected a Model class name or {class_path, init_args}, got a list"});
  EXPECT_EQ(mergedProblems("model: {class_path: TestNet, init_args: 5}"),
            std::vector<std::string>{"t.yaml:1:41: model.init_args: expected a mapping, got '5'"});
}

TEST(Env, DefaultsNeedTheSwitchAndMapToKeys) {
  std::vector<std::string> problems;
  Environment env{{"PL_FIT__EPOCHS", "9"}, {"PL_FIT__MODEL__LR", "0.3"}};
  EXPECT_TRUE(envOverrides(env, "fit", problems).empty());
  env.set("JSONARGPARSE_DEFAULT_ENV", "true");
  auto o = envOverrides(env, "fit", problems);
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].path, "epochs");
  EXPECT_EQ(o[1].path, "model.lr");
  EXPECT_EQ(o[1].value.loc().str(), "environment PL_FIT__MODEL__LR");
  EXPECT_TRUE(envOverrides(env, "test", problems).empty());
}

TEST(Print, RoundTripsAndHonoursFlags) {
  Node n = compose("model: {class_path: TestNet, init_args: {lr: 0.5}}\nnets: [OtherNet]\ndevices: [0, 1]");
  const std::string text = printConfig(n, testType(), {});
  std::vector<std::string> problems;
  EXPECT_EQ(normalize(loadYamlString(text, "printed"), testType(), "", problems), n) << text;
  EXPECT_TRUE(problems.empty());
  const std::string commented = printConfig(n, testType(), {false, false, true});
  EXPECT_NE(commented.find("# Learning rate. (type: float, default: 0.1)\n"), std::string::npos) << commented;
  EXPECT_EQ(normalize(loadYamlString(commented, "printed"), testType(), "", problems), n) << commented;
  const std::string slim = printConfig(n, testType(), {true, true, false});
  EXPECT_EQ(slim,
            "devices: [0, 1]\nmodel:\n  class_path: pytorch_lightning.demos.TestNet\n  init_args:\n    lr: 0.5\n"
            "nets:\n- class_path: OtherNet\n");
}

TEST(Scalars, ParsingAndSuggestions) {
  EXPECT_EQ(parseInt("+12"), 12);
  EXPECT_FALSE(parseInt("1.5").has_value());
  EXPECT_FALSE(parseInt("99999999999999999999").has_value());
  EXPECT_EQ(parseFloat("1e-3"), 1e-3);
  EXPECT_FALSE(parseFloat("0x10").has_value());
  EXPECT_EQ(formatFloat(3.0), "3.0");
  EXPECT_EQ(formatFloat(0.001), "0.001");
  EXPECT_EQ(formatFloat(1e-8), "1.0e-08");  // PyYAML reads "1e-08" as a string
  EXPECT_EQ(formatFloat(2.5e-7), "2.5e-07");
  EXPECT_EQ(closestMatch("max_epoch", {"max_epochs", "max_steps"}), "max_epochs");
  EXPECT_FALSE(closestMatch("zzzzzz", {"max_epochs"}).has_value());
}

}  // namespace
}  // namespace hpu::core::config
