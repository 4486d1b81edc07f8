// The DataLoader: identical batches whatever num_workers is, drop_last,
// abandoning an epoch, distributed ranks, and worker failures surfacing in
// next() (a throwing fetch, a stuck one).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "hpu/core/data/dataloader.h"
#include "hpu/core/base/errors.h"
#include "hpu/device/threading.h"
#include "test_support.h"

namespace hpu::core::data {
namespace {

using ::testing::StartsWith;
using testing::errorOf;

// Sample i has features (i, -i) and label i % 5.
std::shared_ptr<const Dataset> numbered(std::int64_t n) {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    x.push_back(static_cast<float>(i));
    x.push_back(static_cast<float>(-i));
    y.push_back(i % 5);
  }
  return std::make_shared<FloatDataset>(std::vector<std::int64_t>{2}, std::move(x), std::move(y));
}

LoaderOptions options(std::int64_t batch, int workers, bool drop_last = false) {
  LoaderOptions o;
  o.batch_size = batch;
  o.num_workers = workers;
  o.drop_last = drop_last;
  o.sampler.shuffle = true;
  o.sampler.seed = 17;
  return o;
}

std::vector<HostBatch> epoch(DataLoader& loader, std::int64_t e) {
  loader.startEpoch(e);
  std::vector<HostBatch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  EXPECT_FALSE(loader.next().has_value()) << "the end of an epoch stays the end";
  return out;
}

// Sample ids of a batch (feature 0 of each sample).
std::vector<std::int64_t> ids(const HostBatch& b) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < b.size(); ++i) out.push_back(static_cast<std::int64_t>(b["x"].floats[static_cast<std::size_t>(2 * i)]));
  return out;
}

// A ByteDataset's batch is the same whether its samples are converted on
// one thread or shared out on the team: (v / 255 - mean) / std per byte.
TEST(ByteDataset, FetchConvertsEverySampleTheSameOnOneThreadOrOnTheTeam) {
  constexpr std::int64_t kSamples = 300, kPixels = 70;
  std::vector<std::uint8_t> pixels(kSamples * kPixels);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7 % 256);
  std::vector<std::int64_t> labels(kSamples);
  for (std::int64_t i = 0; i < kSamples; ++i) labels[static_cast<std::size_t>(i)] = i % 10;
  const ByteDataset data({kPixels}, pixels, labels, 0.25f, 0.5f);
  std::vector<std::int64_t> order;
  for (std::int64_t i = 0; i < 200; ++i) order.push_back(i * 37 % kSamples);
  const auto fetch = [&](int threads) {
    const int before = device::intraOpThreads();
    device::setIntraOpThreads(threads);
    device::setAlwaysParallelForTesting(true);
    std::vector<float> x(order.size() * kPixels);
    std::vector<std::int64_t> y(order.size());
    const FieldBuffer out[] = {{x.data(), nullptr}, {nullptr, y.data()}};
    data.fetch(order, out);
    device::setAlwaysParallelForTesting(false);
    device::setIntraOpThreads(before);
    return std::make_pair(x, y);
  };
  const auto [x1, y1] = fetch(1);
  const auto [x2, y2] = fetch(2);
  EXPECT_EQ(x1, x2);
  EXPECT_EQ(y1, y2);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto sample = static_cast<std::size_t>(order[i]);
    EXPECT_EQ(y2[i], labels[sample]) << "sample " << i;
    for (std::size_t j = 0; j < kPixels; j += 23)
      EXPECT_NEAR(x2[i * kPixels + j], (pixels[sample * kPixels + j] / 255.0f - 0.25f) / 0.5f, 1e-6f)
          << "sample " << i << " pixel " << j;
  }
}

TEST(DataLoader, BatchesFollowTheSamplerOrderWithLabels) {
  DataLoader loader(numbered(23), options(4, 0));
  EXPECT_EQ(loader.numBatches(), 6);
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 6u);
  const std::vector<std::int64_t> order = epochIndices(23, loader.options().sampler, 0);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const HostBatch& batch = batches[b];
    EXPECT_EQ(batch.index, static_cast<std::int64_t>(b));
    EXPECT_EQ(batch["x"].shape, (std::vector<std::int64_t>{b < 5 ? 4 : 3, 2})) << "the last batch keeps the remainder";
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      const std::int64_t id = order[b * 4 + static_cast<std::size_t>(i)];
      EXPECT_EQ(batch["x"].floats[static_cast<std::size_t>(2 * i)], static_cast<float>(id));
      EXPECT_EQ(batch["x"].floats[static_cast<std::size_t>(2 * i + 1)], static_cast<float>(-id));
      EXPECT_EQ(batch["y"].ints[static_cast<std::size_t>(i)], id % 5);
    }
  }
}

TEST(DataLoader, DropLastDropsTheIncompleteBatch) {
  DataLoader loader(numbered(23), options(4, 2, true));
  EXPECT_EQ(loader.numBatches(), 5);
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 5u);
  for (const HostBatch& b : batches) EXPECT_EQ(b.size(), 4);
}

TEST(DataLoader, SameBatchesForZeroOneAndThreeWorkers) {
  DataLoader reference(numbered(23), options(4, 0));
  for (int workers : {1, 3}) {
    DataLoader loader(numbered(23), options(4, workers));
    for (std::int64_t e : {0, 1, 2}) {
      SCOPED_TRACE("workers " + std::to_string(workers) + ", epoch " + std::to_string(e));
      const auto expected = epoch(reference, e), got = epoch(loader, e);
      ASSERT_EQ(got.size(), expected.size());
      for (std::size_t b = 0; b < got.size(); ++b) {
        EXPECT_EQ(got[b].index, expected[b].index);
        EXPECT_EQ(got[b]["x"].shape, expected[b]["x"].shape);
        EXPECT_EQ(got[b]["x"].floats, expected[b]["x"].floats);
        EXPECT_EQ(got[b]["y"].ints, expected[b]["y"].ints);
      }
    }
  }
}

TEST(DataLoader, MoreWorkersThanBatches) {
  DataLoader loader(numbered(5), options(4, 8));
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1].size(), 1);
}

TEST(DataLoader, AnAbandonedEpochDoesNotLeakIntoTheNext) {
  DataLoader fresh(numbered(40), options(4, 0));
  const auto expected = epoch(fresh, 1);
  DataLoader loader(numbered(40), options(4, 3));
  loader.startEpoch(0);
  ASSERT_TRUE(loader.next().has_value());
  const auto got = epoch(loader, 1);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t b = 0; b < got.size(); ++b) EXPECT_EQ(ids(got[b]), ids(expected[b])) << "batch " << b;
}

// Rank loaders with batch B/N deliver, at each step, the single-device
// batch's samples between them.
TEST(DataLoader, DistributedRankBatchesUnionToTheSingleDeviceBatch) {
  const std::int64_t size = 64, batch = 8;
  DataLoader single(numbered(size), options(batch, 0));
  const auto global = epoch(single, 3);
  for (int n : {2, 4}) {
    std::vector<std::vector<HostBatch>> ranks;
    for (int r = 0; r < n; ++r) {
      LoaderOptions o = options(batch / n, 2);
      o.sampler.num_replicas = n;
      o.sampler.rank = r;
      DataLoader loader(numbered(size), o);
      ranks.push_back(epoch(loader, 3));
      ASSERT_EQ(ranks.back().size(), global.size());
    }
    for (std::size_t t = 0; t < global.size(); ++t) {
      const auto g = ids(global[t]);
      std::multiset<std::int64_t> expected(g.begin(), g.end()), got;
      for (const auto& r : ranks) {
        const auto mine = ids(r[t]);
        got.insert(mine.begin(), mine.end());
      }
      EXPECT_EQ(got, expected) << "world size " << n << ", step " << t;
    }
  }
}

// A data set whose fetch fails for one sample.
class FailingDataset : public Dataset {
 public:
  explicit FailingDataset(std::int64_t bad) : base_(numbered(40)), bad_(bad) {}
  std::int64_t size() const override { return base_->size(); }
  const std::vector<Field>& fields() const override { return base_->fields(); }
  void fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const override {
    for (std::int64_t i : indices)
      if (i == bad_) throw DataError("sample " + std::to_string(i) + " is unreadable");
    base_->fetch(indices, out);
  }

 private:
  std::shared_ptr<const Dataset> base_;
  std::int64_t bad_;
};

TEST(DataLoader, AWorkerErrorIsRethrownByNext) {
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    LoaderOptions o = options(4, workers);
    o.sampler.shuffle = false;  // sample 29 is in batch 7
    DataLoader loader(std::make_shared<FailingDataset>(29), o);
    loader.startEpoch(0);
    std::int64_t delivered = 0;
    const std::string message = errorOf<DataError>([&] {
      while (auto b = loader.next()) {
        ASSERT_LT(b->index, 7) << "the failing batch is never delivered";
        ++delivered;
      }
    });
    EXPECT_EQ(message, "sample 29 is unreadable");
    EXPECT_LE(delivered, 7);
    EXPECT_THROW(loader.next(), DataError) << "the failure persists";
  }
}

// A data set whose fetch of sample 0 waits until released (at most 10 s).
class StuckDataset : public Dataset {
 public:
  StuckDataset() : base_(numbered(8)) {}
  std::int64_t size() const override { return base_->size(); }
  const std::vector<Field>& fields() const override { return base_->fields(); }
  void fetch(std::span<const std::int64_t> indices, std::span<const FieldBuffer> out) const override {
    if (indices[0] == 0) {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(10), [&] { return released_; });
    }
    base_->fetch(indices, out);
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::shared_ptr<const Dataset> base_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool released_ = false;
};

TEST(DataLoader, AStuckWorkerFailsNextAfterTheTimeout) {
  auto data = std::make_shared<StuckDataset>();
  LoaderOptions o = options(2, 2);
  o.sampler.shuffle = false;
  o.worker_timeout = std::chrono::milliseconds(100);
  DataLoader loader(data, o);
  loader.startEpoch(0);
  EXPECT_EQ(errorOf([&] { loader.next(); }),
            "data loader worker did not deliver batch 0 within 0.1 s; lower data.init_args.num_workers or check the "
            "data set");
  data->release();  // lets the worker finish so the loader can join it
}

}  // namespace
}  // namespace hpu::core::data
