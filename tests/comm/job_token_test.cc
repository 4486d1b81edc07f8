// The job token's sources and checks, and the keys derived from it. The
// secret must never show up in an error message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <fstream>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/errors.h"
#include "hpu/comm/job_token.h"

namespace hpu::comm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kSecret = "s3cret-token-for-the-test";

std::string writeTokenFile(const std::string& content, mode_t mode) {
  static std::atomic<int> counter{0};
  const std::string path = fmt::format("{}/token_{}_{}", ::testing::TempDir(), ::getpid(), counter++);
  std::ofstream(path) << content;
  ::chmod(path.c_str(), mode);
  return path;
}

std::string errorOf(const Environment& env) {
  try {
    JobToken::fromEnv(env);
  } catch (const EnvError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no EnvError";
  return "";
}

TEST(JobToken, AbsentMeansEmpty) { EXPECT_TRUE(JobToken::fromEnv({}).empty()); }

TEST(JobToken, FromVariableAndFromAnOwnerOnlyFileDeriveTheSameKeys) {
  const JobToken inlineToken = JobToken::fromEnv({{"HPU_JOB_TOKEN", kSecret}});
  const JobToken fileToken =
      JobToken::fromEnv({{"HPU_JOB_TOKEN_FILE", writeTokenFile(std::string(kSecret) + "\n", 0600)}});
  EXPECT_FALSE(inlineToken.empty());
  EXPECT_EQ(inlineToken.derive("purpose"), fileToken.derive("purpose"));
  EXPECT_NE(inlineToken.derive("purpose"), inlineToken.derive("another purpose"));
  EXPECT_NE(inlineToken.derive("purpose"), JobToken::fromEnv({{"HPU_JOB_TOKEN", "another-secret-0123456"}}).derive("purpose"));
}

TEST(JobToken, FileReadableByOthersIsRefusedWithChmodAdvice) {
  const std::string path = writeTokenFile(kSecret, 0644);
  const std::string message = errorOf({{"HPU_JOB_TOKEN_FILE", path}});
  EXPECT_EQ(message, fmt::format("HPU_JOB_TOKEN_FILE={} has mode 0644; a token file must be readable by its owner "
                                 "only: chmod 600 {}",
                                 path, path));
  EXPECT_THAT(message, Not(HasSubstr(kSecret)));
}

TEST(JobToken, MissingFileBothSourcesAndShortSecretsAreErrorsWithoutTheSecret) {
  EXPECT_THAT(errorOf({{"HPU_JOB_TOKEN_FILE", "/nonexistent/token"}}),
              HasSubstr("HPU_JOB_TOKEN_FILE=/nonexistent/token: cannot open it (No such file or directory)"));
  EXPECT_EQ(errorOf({{"HPU_JOB_TOKEN", kSecret}, {"HPU_JOB_TOKEN_FILE", "/x"}}),
            "both HPU_JOB_TOKEN and HPU_JOB_TOKEN_FILE are set; set only one");
  const std::string shortMessage = errorOf({{"HPU_JOB_TOKEN", "hunter2"}});
  EXPECT_THAT(shortMessage, HasSubstr("the job token from HPU_JOB_TOKEN has 7 characters; use at least 16"));
  EXPECT_THAT(shortMessage, Not(HasSubstr("hunter2")));
}

TEST(JobToken, GeneratedTokensAreLongAndDistinct) {
  const JobToken a = JobToken::generate();
  const JobToken b = JobToken::generate();
  EXPECT_EQ(a.secretForChildEnvironment().size(), 64u);
  EXPECT_NE(a.secretForChildEnvironment(), b.secretForChildEnvironment());
  // A generated token passes the checks a worker applies when it reads it back.
  EXPECT_EQ(JobToken::fromEnv({{"HPU_JOB_TOKEN", a.secretForChildEnvironment()}}).derive("x"), a.derive("x"));
}

}  // namespace
}  // namespace hpu::comm
