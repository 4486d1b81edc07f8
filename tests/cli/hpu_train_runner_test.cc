// The runner the CLI tests stand on: exit status, captured streams, the
// explicit environment and working directory, and the deadline that kills a
// child and everything it started.
#include "hpu_train_runner.h"

#include <signal.h>

#include <chrono>
#include <filesystem>

namespace hpu::cli::testing {
namespace {

TEST(Runner, CapturesStreamsExitCodeEnvironmentAndDirectory) {
  ScratchDir dir;
  RunOptions o;
  o.cwd = dir.path();
  o.env = {{"GREETING", "hello"}};
  const RunResult r = runProgram("/bin/sh", {"-c", "echo $GREETING; pwd; echo oops >&2; echo [$HOME]; exit 3"}, o);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "hello\n" + std::filesystem::canonical(dir.path()).string() + "\n[]\n");
  EXPECT_EQ(r.err, "oops\n");
}

TEST(Runner, DeadlineKillsTheChildAndWhatItStarted) {
  ScratchDir dir;
  RunOptions o;
  o.cwd = dir.path();
  o.timeout = std::chrono::milliseconds(300);
  const RunResult r = runProgram("/bin/sh", {"-c", "sleep 30 & echo $!; wait"}, o);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.exit_code, -1);
  const std::string sleeper = r.out.substr(0, r.out.find('\n'));
  ASSERT_FALSE(sleeper.empty());
  EXPECT_TRUE(processEnded(sleeper, std::chrono::steady_clock::now() + std::chrono::seconds(10)))
      << "background sleep " << sleeper << " survived";
}

TEST(Runner, ScratchDirIsRemovedWithItsContents) {
  std::filesystem::path kept;
  {
    ScratchDir dir;
    kept = dir.path();
    writeFile(dir.path() / "a.txt", "x");
    std::filesystem::create_directory(dir.path() / "sub");
    writeFile(dir.path() / "sub" / "b.txt", "y");
    EXPECT_EQ(readFile(dir.path() / "sub" / "b.txt"), "y");
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(Runner, MissingProgramThrows) {
  ScratchDir dir;
  RunOptions o;
  o.cwd = dir.path();
  EXPECT_THROW(runProgram(dir.path() / "no-such-program", {}, o), std::runtime_error);
}

}  // namespace
}  // namespace hpu::cli::testing
