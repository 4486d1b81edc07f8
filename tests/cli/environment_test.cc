// The environment is read once: main() takes the one snapshot, the layers
// parse their settings from what they are handed, and the catalogue
// (env/catalogue.h) lists every variable read, as --help and
// docs/environment.md show it. Unknown HPU_* variables are warned of with
// the closest known name.
#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "hpu/env/catalogue.h"
#include "hpu/env/environment.h"
#include "hpu_train_runner.h"

namespace hpu::cli::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(EnvironmentValue, ParsesMainsEntriesAndRefusesUncataloguedReads) {
  const char* entries[] = {"HPU_EMULATOR_DEVICES=4", "MASTER_ADDR=10.0.0.1", "HPU_JOB_TOKEN=a=b", "NO_EQUALS_SIGN",
                           "HPU_COLLECTIVES=", nullptr};
  const Environment env = Environment::fromEntries(entries);
  EXPECT_EQ(env.get("HPU_EMULATOR_DEVICES"), "4");
  EXPECT_EQ(env.get("HPU_JOB_TOKEN"), "a=b");  // the first '=' ends the name
  EXPECT_EQ(env.get("HPU_COLLECTIVES"), "");   // set, empty
  EXPECT_FALSE(env.contains("HPU_PEER_TIMEOUT"));
  EXPECT_EQ(env.variables().size(), 4u);
  EXPECT_EQ(env.entries(), (std::vector<std::string>{"HPU_COLLECTIVES=", "HPU_EMULATOR_DEVICES=4",
                                                     "HPU_JOB_TOKEN=a=b", "MASTER_ADDR=10.0.0.1"}));
  // A read of a variable the catalogue does not list is a bug, caught here.
  try {
    (void)env.get("HPU_NOT_A_SETTING");
    FAIL() << "an uncatalogued read passed";
  } catch (const std::logic_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("HPU_NOT_A_SETTING is read but not in the catalogue"));
  }
  Environment copy = env;
  copy.set("LOCAL_RANK", "1");
  copy.unset("MASTER_ADDR");
  EXPECT_EQ(copy.get("LOCAL_RANK"), "1");
  EXPECT_FALSE(copy.contains("MASTER_ADDR"));
  EXPECT_NE(copy, env);
  EXPECT_EQ(Environment::fromEntries(nullptr), Environment{});
}

TEST(EnvironmentCatalogue, NamesAreUniqueAndUnknownOnesAreTheUncataloguedHpuOnes) {
  std::set<std::string_view> names;
  for (const env::Variable& v : env::catalogue()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " is listed twice";
    EXPECT_FALSE(v.meaning.empty() || v.default_value.empty() || v.feeds.empty()) << v.name;
    if (v.name.find('<') == std::string_view::npos) {
      EXPECT_EQ(env::findVariable(v.name), &v);
    }
  }
  const Environment env{{"HPU_EMULATOR_DEVICES", "2"}, {"HPU_DEVICESS", "2"}, {"HPU_JOBS", "2"},
                        {"PATH", "/bin"},              {"HPU_ZZ", "1"}};
  EXPECT_EQ(env::unknownProductVariables(env), (std::vector<std::string>{"HPU_DEVICESS", "HPU_ZZ"}));
}

// The source tree outside main(): no getenv, no environ, no setenv.
TEST(EnvironmentReads, NoLibraryReadsTheProcessEnvironment) {
  const std::regex read(R"(\b(getenv|secure_getenv|setenv|unsetenv|putenv|clearenv)\s*\(|\benviron\b)");
  std::vector<std::string> found;
  std::size_t scanned = 0;
  for (const char* top : {"cli", "core", "comm", "device", "numerics", "env", "examples"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(sourcePath(top))) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      ++scanned;
      std::ifstream in(entry.path());
      int number = 0;
      for (std::string line; std::getline(in, line);) {
        ++number;
        if (std::regex_search(line, read))
          found.push_back(std::filesystem::relative(entry.path(), sourcePath(".")).string() + ":" +
                          std::to_string(number) + ": " + line);
      }
    }
  }
  EXPECT_GT(scanned, 300u);  // the tree was found
  std::string list;
  for (const std::string& f : found) list += "\n  " + f;
  EXPECT_TRUE(found.empty()) << "hpu-train reads its environment once, in main() (cli/src/main.cc passes envp to "
                                "runCli); hand the Environment down instead:"
                             << list;
  std::ifstream main_cc(sourcePath("cli/src/main.cc"));
  const std::string main_text((std::istreambuf_iterator<char>(main_cc)), std::istreambuf_iterator<char>());
  EXPECT_THAT(main_text, HasSubstr("runCli(argc, argv, envp)"));
}

using EnvironmentTest = HpuTrainTest;

TEST_F(EnvironmentTest, HelpListsEveryVariableWithItsMeaningAndDefault) {
  const RunResult r = run({"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.out, HasSubstr("Environment variables (read once at start-up; docs/environment.md says more):"));
  EXPECT_EQ(r.out.find(env::describeCatalogue()) != std::string::npos, true) << r.out;
  for (const env::Variable& v : env::catalogue()) {
    const std::string line = std::string(v.meaning) + " (default: " + std::string(v.default_value) + ")";
    if (v.group == env::Group::kRepository) {
      EXPECT_THAT(r.out, Not(HasSubstr(std::string(v.name)))) << "hpu-train does not read " << v.name;
      continue;
    }
    const std::regex row("\n    " + std::regex_replace(std::string(v.name), std::regex(R"([<>])"), R"(\$&)") +
                         " +" + std::regex_replace(line, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") + "\n");
    EXPECT_TRUE(std::regex_search(r.out, row)) << v.name << " with '" << line << "' is not in --help";
  }
}

// docs/environment.md's tables hold the catalogue's rows, no more, no fewer.
TEST(EnvironmentDocs, ThePageListsTheCatalogue) {
  std::ifstream in(sourcePath("docs/environment.md"));
  ASSERT_TRUE(in) << "docs/environment.md is missing";
  std::set<std::string> rows;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| `", 0) == 0) rows.insert(line);
  std::set<std::string> expected;
  std::string page;  // what the tables should hold, to paste
  bool first = true;
  env::Group group{};
  for (const env::Variable& v : env::catalogue()) {
    if (first || v.group != group) {
      page += "\n## " + std::string(env::groupTitle(v.group)) +
              "\n\n| Variable | Default | Meaning | Feeds |\n| --- | --- | --- | --- |\n";
      group = v.group;
      first = false;
    }
    const std::string row = "| `" + std::string(v.name) + "` | " + std::string(v.default_value) + " | " +
                            std::string(v.meaning) + " | `" + std::string(v.feeds) + "` |";
    expected.insert(row);
    page += row + "\n";
  }
  EXPECT_EQ(rows, expected) << "docs/environment.md's tables differ from env/src/catalogue.cc; they should read:\n"
                            << page;
}

TEST_F(EnvironmentTest, AnUnknownHpuVariableIsWarnedOfWithTheClosestName) {
  env()["HPU_DEVICESS"] = "2";              // a word left out, and a typo
  env()["HPU_EMULATOR_GENERATON"] = "gaudi3";  // a typo
  env()["HPU_QQQQQQQQQQQQQQQQ"] = "1";      // nothing close
  env()["HPU_JOBS"] = "2";                  // the build scripts' own: no warning
  const RunResult r = run({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("warning: HPU_DEVICESS is set but hpu-train reads no such variable; did you mean "
                               "'HPU_EMULATOR_DEVICES'? (hpu-train --help lists them)"));
  EXPECT_THAT(r.err, HasSubstr("warning: HPU_EMULATOR_GENERATON is set but hpu-train reads no such variable; did you "
                               "mean 'HPU_EMULATOR_GENERATION'?"));
  EXPECT_THAT(r.err, HasSubstr("warning: HPU_QQQQQQQQQQQQQQQQ is set but hpu-train reads no such variable (hpu-train "
                               "--help lists them)"));
  EXPECT_THAT(r.err, Not(HasSubstr("HPU_JOBS")));
  // The variables were read as they are: the misspelt generation did not apply.
  EXPECT_THAT(r.out, HasSubstr("Gaudi 2")) << r.out;
}

TEST_F(EnvironmentTest, ARankHpuTrainStartedDoesNotWarnAgain) {
  env()["HPU_DEVICESS"] = "2";
  env()["LOCAL_RANK"] = "1";
  const RunResult r = run({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_THAT(r.err, Not(HasSubstr("HPU_DEVICESS")));
}

TEST_F(EnvironmentTest, BadValuesStopTheRunNamingTheVariable) {
  env()["HPU_LOG_LEVEL"] = "loud";
  RunResult r = run({"devices"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("HPU_LOG_LEVEL: unknown level 'loud' (trace, debug, info, warn, error, critical, off)"));
  env()["HPU_LOG_LEVEL"] = "warn";
  env()["HPU_FAULT"] = "explode,rank=0,step=1";
  r = run({"devices"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_THAT(r.err, HasSubstr("HPU_FAULT: 'explode,rank=0,step=1'"));
}

}  // namespace
}  // namespace hpu::cli::testing
