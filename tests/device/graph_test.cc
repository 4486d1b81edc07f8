#include "hpu/device/graph.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hpu/device/errors.h"
#include "hpu/device/recipe_disk_cache.h"

namespace hpu::device {
namespace {

using Shape = std::vector<std::int64_t>;

// One training step of a small MLP on a batch of `batch` rows.
void mlpStep(GraphRuntime& g, std::int64_t batch, DType dtype = DType::kFloat32, std::int64_t hidden = 128) {
  const Shape x{batch, 784}, w1{hidden, 784}, h{batch, hidden}, w2{10, hidden}, logits{batch, 10}, labels{batch};
  g.recordOp("linear", {{x, dtype}, {w1, dtype}});
  g.recordOp("relu", {{h, dtype}});
  g.recordOp("linear", {{h, dtype}, {w2, dtype}});
  g.recordOp("cross_entropy", {{logits, dtype}, {labels, DType::kInt64}});
  g.markStep();
}

TEST(Graph, LazyModeCompilesEachDistinctStepGraphOnce) {
  GraphRuntime g("hpu:0", {});
  for (int i = 0; i < 5; ++i) mlpStep(g, 64);
  EXPECT_EQ(g.stats().steps, 5u);
  EXPECT_EQ(g.stats().ops, 20u);
  EXPECT_EQ(g.stats().compilations, 1u);
  EXPECT_EQ(g.stats().cacheHits, 4u);
  EXPECT_EQ(g.stats().recompilations, 0u);
  EXPECT_EQ(g.summary(), "hpu:0 lazy mode: 5 steps, 20 ops; 1 graph compilation, 4 cache hits");
}

TEST(Graph, ASmallerLastBatchIsARecompileWithADropLastHint) {
  GraphRuntime g("hpu:0", {});
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int i = 0; i < 3; ++i) mlpStep(g, 64);
    mlpStep(g, 32);  // the last, partial batch
  }
  EXPECT_EQ(g.stats().compilations, 2u);
  EXPECT_EQ(g.stats().cacheHits, 6u);
  EXPECT_EQ(g.stats().recompilations, 1u);
  ASSERT_EQ(g.recompileCauses().size(), 1u);
  const RecompileCause& cause = g.recompileCauses()[0];
  EXPECT_EQ(cause.step, 4u);
  EXPECT_TRUE(cause.leadingDimOnly);
  EXPECT_EQ(cause.change,
            "linear (op 1 of 4) operand 0: [64,784] -> [32,784]; relu (op 2 of 4) operand 0: [64,128] -> [32,128]; "
            "linear (op 3 of 4) operand 0: [64,128] -> [32,128]; and 1 more ops");
  EXPECT_TRUE(g.leadingDimRecompiled());
  EXPECT_EQ(g.summary(),
            "hpu:0 lazy mode: 8 steps, 32 ops; 2 graph compilations, 6 cache hits\n"
            "1 recompilation from changed shapes or dtypes:\n"
            "  step 4: linear (op 1 of 4) operand 0: [64,784] -> [32,784]; relu (op 2 of 4) operand 0: [64,128] -> "
            "[32,128]; linear (op 3 of 4) operand 0: [64,128] -> [32,128]; and 1 more ops\n"
            "hint: the leading (batch) dimension changed, as a smaller last batch of an epoch does; set "
            "data.init_args.drop_last=true (DataLoader drop_last=True) or pad batches to a fixed size so every step "
            "reuses one compiled graph");
}

TEST(Graph, DTypeChangesAreRecompilesWithoutTheBatchHint) {
  GraphRuntime g("hpu:0", {});
  mlpStep(g, 64);
  mlpStep(g, 64, DType::kBFloat16);
  ASSERT_EQ(g.recompileCauses().size(), 1u);
  EXPECT_FALSE(g.recompileCauses()[0].leadingDimOnly);
  EXPECT_EQ(g.recompileCauses()[0].change,
            "linear (op 1 of 4) operand 0: float32[64,784] -> bfloat16[64,784]; relu (op 2 of 4) operand 0: "
            "float32[64,128] -> bfloat16[64,128]; linear (op 3 of 4) operand 0: float32[64,128] -> "
            "bfloat16[64,128]; and 1 more ops");
  EXPECT_FALSE(g.leadingDimRecompiled());
  EXPECT_EQ(g.summary().find("hint:"), std::string::npos);
}

// A dropless mixture of experts: the batch keeps its shape, an expert's rows
// change with the routing. The hint names that, not the batch.
TEST(Graph, ShapesChangingInsideAStepGetTheDataDependentShapeHint) {
  GraphRuntime g("hpu:0", {});
  for (const std::int64_t rows : {40, 24}) {
    const Shape ids{8, 16}, hidden{128, 32}, expert{rows, 32}, w{48, 32};
    g.recordOp("embedding", {{ids, DType::kInt64}, {Shape{64, 32}, DType::kFloat32}});
    g.recordOp("moe_dispatch", {{hidden, DType::kFloat32}, {expert, DType::kFloat32}});
    g.recordOp("linear", {{expert, DType::kFloat32}, {w, DType::kFloat32}});
    g.markStep();
  }
  ASSERT_EQ(g.recompileCauses().size(), 1u);
  EXPECT_FALSE(g.recompileCauses()[0].firstOpChanged);
  EXPECT_FALSE(g.leadingDimRecompiled());
  const std::string summary = g.summary();
  EXPECT_EQ(summary.find("hint: the leading (batch) dimension"), std::string::npos) << summary;
  EXPECT_NE(summary.find("hint: shapes changed inside a step whose first op kept its shapes: an op whose output size "
                         "depends on the values it reads (a dropless mixture of experts' rows per expert) makes a "
                         "graph of every size it meets, on Gaudi as here"),
            std::string::npos)
      << summary;
}

TEST(Graph, TheCauseComparesWithTheMostSimilarCompiledGraph) {
  GraphRuntime g("hpu:0", {});
  mlpStep(g, 64, DType::kFloat32, 128);
  mlpStep(g, 64, DType::kFloat32, 256);  // a different model width: a recompile of all hidden shapes
  mlpStep(g, 32, DType::kFloat32, 256);  // against the 256-wide graph only the batch changed
  ASSERT_EQ(g.recompileCauses().size(), 2u);
  EXPECT_FALSE(g.recompileCauses()[0].leadingDimOnly);
  EXPECT_EQ(g.recompileCauses()[0].change,
            "linear (op 1 of 4) operand 1: [128,784] -> [256,784]; relu (op 2 of 4) operand 0: [64,128] -> "
            "[64,256]; linear (op 3 of 4) operand 0: [64,128] -> [64,256]");
  EXPECT_TRUE(g.recompileCauses()[1].leadingDimOnly);
  EXPECT_EQ(g.recompileCauses()[1].step, 3u);
}

TEST(Graph, ADifferentGraphIsACompilationButNotARecompile) {
  GraphRuntime g("hpu:0", {});
  mlpStep(g, 64);
  const Shape x{64, 784}, w{128, 784};
  g.recordOp("linear", {{x, DType::kFloat32}, {w, DType::kFloat32}});  // a validation step: forward only
  g.markStep();
  g.markStep();  // an empty step compiles nothing
  EXPECT_EQ(g.stats().compilations, 2u);
  EXPECT_EQ(g.stats().recompilations, 0u);
  EXPECT_EQ(g.stats().steps, 3u);
  EXPECT_TRUE(g.recompileCauses().empty());
}

TEST(Graph, RankChangesAreNotLeadingDimensionChanges) {
  GraphRuntime g("hpu:0", {});
  const Shape a{64, 10}, b{640};
  g.recordOp("sum", {{a, DType::kFloat32}});
  g.markStep();
  g.recordOp("sum", {{b, DType::kFloat32}});
  g.markStep();
  ASSERT_EQ(g.recompileCauses().size(), 1u);
  EXPECT_EQ(g.recompileCauses()[0].change, "sum (op 1 of 1) operand 0: [64,10] -> [640]");
  EXPECT_FALSE(g.recompileCauses()[0].leadingDimOnly);
}

TEST(Graph, EagerModeCompilesEachDistinctOpOnce) {
  GraphRuntime g("hpu:1", {ExecutionMode::kEager});
  for (int i = 0; i < 3; ++i) mlpStep(g, 64);
  EXPECT_EQ(g.stats().compilations, 4u);  // linear x2 shapes, relu, cross_entropy
  EXPECT_EQ(g.stats().cacheHits, 8u);
  EXPECT_EQ(g.stats().steps, 3u);
  const Shape x{32, 784}, w{128, 784};
  g.recordOp("linear", {{x, DType::kFloat32}, {w, DType::kFloat32}});
  EXPECT_EQ(g.stats().compilations, 5u);
  ASSERT_EQ(g.recompileCauses().size(), 1u);
  EXPECT_EQ(g.recompileCauses()[0].change, "linear (op 1 of 1) operand 0: [64,784] -> [32,784]");
  EXPECT_EQ(g.recompileCauses()[0].step, 4u);
  EXPECT_EQ(g.summary().substr(0, g.summary().find('\n')),
            "hpu:1 eager mode: 3 steps, 13 ops; 5 recipe compilations, 8 cache hits");
}

TEST(Graph, CausesAreCappedButCounted) {
  GraphRuntime g("hpu:0", {});
  for (int batch = 1; batch <= 40; ++batch) mlpStep(g, batch);
  EXPECT_EQ(g.stats().recompilations, 39u);
  EXPECT_EQ(g.recompileCauses().size(), GraphRuntime::kMaxRecordedCauses);
  EXPECT_NE(g.summary().find("\n  ... and 7 more\n"), std::string::npos);
}

TEST(Graph, OpNamesAreHashedAtCompileTime) {
  constexpr OpName a("linear");
  constexpr OpName b("linear");
  static_assert(a.hash() == b.hash());
  static_assert(OpName("relu").hash() != a.hash());
  EXPECT_EQ(a.name(), "linear");
}

// ---- recipes on disk (PT_HPU_RECIPE_CACHE_CONFIG) ----

class RecipeDiskCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(HPU_BINARY_DIR) / "test_recipe_cache" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::shared_ptr<RecipeDiskCache> open(bool deleteOnInit = false, std::uint64_t mb = 64) {
    return std::make_shared<RecipeDiskCache>(RecipeCacheConfig{dir_, deleteOnInit, mb << 20});
  }
  std::size_t recipeFiles() const {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) n += e.path().extension() == ".recipe";
    return n;
  }

  std::filesystem::path dir_;
};

TEST_F(RecipeDiskCacheTest, ASecondProcessFindsTheRecipesOfTheFirst) {
  {
    GraphRuntime first("hpu:0", {ExecutionMode::kLazy, "gaudi2", open()});
    mlpStep(first, 64);
    mlpStep(first, 32);
    EXPECT_EQ(first.stats().compilations, 2u);
    EXPECT_EQ(first.stats().diskCacheHits, 0u);
  }
  EXPECT_EQ(recipeFiles(), 2u);
  GraphRuntime second("hpu:0", {ExecutionMode::kLazy, "gaudi2", open()});  // a new cache object: a new process
  mlpStep(second, 64);
  mlpStep(second, 64);
  mlpStep(second, 32);
  EXPECT_EQ(second.stats().compilations, 0u);
  EXPECT_EQ(second.stats().cacheHits, 3u);
  EXPECT_EQ(second.stats().diskCacheHits, 2u);
  EXPECT_EQ(second.summary(),
            "hpu:0 lazy mode: 3 steps, 12 ops; 0 graph compilations, 3 cache hits (2 from the recipe disk cache)");

  GraphRuntime otherTarget("hpu:0", {ExecutionMode::kLazy, "gaudi3", open()});
  mlpStep(otherTarget, 64);
  EXPECT_EQ(otherTarget.stats().compilations, 1u);  // recipes are per generation
  GraphRuntime eager("hpu:0", {ExecutionMode::kEager, "gaudi2", open()});
  mlpStep(eager, 64);
  EXPECT_EQ(eager.stats().compilations, 4u);  // and per mode
}

// Waits for a child process for at most `limit`; kills it past the deadline.
// Returns its exit code, or -1 if it was killed or did not exit normally.
int waitForChild(pid_t child, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(RecipeDiskCacheTest, AnotherProcessFindsTheRecipes) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the first run: compiles both graphs and persists them
    GraphRuntime g("hpu:0", {ExecutionMode::kLazy, "gaudi2", open()});
    mlpStep(g, 64);
    mlpStep(g, 32);
    ::_exit(g.stats().compilations == 2 ? 0 : 1);
  }
  ASSERT_EQ(waitForChild(child, std::chrono::seconds(30)), 0);
  GraphRuntime g("hpu:0", {ExecutionMode::kLazy, "gaudi2", open()});
  mlpStep(g, 64);
  mlpStep(g, 32);
  EXPECT_EQ(g.stats().compilations, 0u);
  EXPECT_EQ(g.stats().diskCacheHits, 2u);
}

TEST_F(RecipeDiskCacheTest, DeleteOnInitStartsEmpty) {
  open()->store("gaudi2 lazy\nrelu float32[4]\n");
  EXPECT_EQ(recipeFiles(), 1u);
  auto cache = open(/*deleteOnInit=*/true);
  EXPECT_EQ(recipeFiles(), 0u);
  EXPECT_FALSE(cache->contains("gaudi2 lazy\nrelu float32[4]\n"));
}

TEST_F(RecipeDiskCacheTest, OnlyTheWholeRecipeTextMatches) {
  auto cache = open();
  cache->store("gaudi2 lazy\nrelu float32[4]\n");
  EXPECT_TRUE(cache->contains("gaudi2 lazy\nrelu float32[4]\n"));
  EXPECT_FALSE(cache->contains("gaudi2 lazy\nrelu float32[5]\n"));
  // A file at the right name with other content (a hash collision) is a miss.
  for (const auto& e : std::filesystem::directory_iterator(dir_)) std::ofstream(e.path()) << "other";
  EXPECT_FALSE(cache->contains("gaudi2 lazy\nrelu float32[4]\n"));
}

TEST_F(RecipeDiskCacheTest, TheOldestRecipesGoWhenTheDirectoryOutgrowsItsSize) {
  auto cache = open(false, /*mb=*/1);
  const std::string oldest = "old\n" + std::string(600 * 1024, 'a');
  const std::string newest = "new\n" + std::string(600 * 1024, 'b');
  cache->store(oldest);
  for (const auto& e : std::filesystem::directory_iterator(dir_))  // make the order unambiguous
    std::filesystem::last_write_time(e.path(), e.last_write_time() - std::chrono::seconds(10));
  cache->store(newest);
  EXPECT_EQ(recipeFiles(), 1u);
  EXPECT_FALSE(cache->contains(oldest));
  EXPECT_TRUE(cache->contains(newest));
}

TEST_F(RecipeDiskCacheTest, AnUnusableDirectoryIsAConfigError) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  EXPECT_THROW(RecipeDiskCache(RecipeCacheConfig{dir_ / "file", false, 1 << 20}), EmulatorConfigError);
}

}  // namespace
}  // namespace hpu::device
