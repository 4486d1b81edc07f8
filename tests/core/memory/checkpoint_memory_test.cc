// Host memory of checkpoint files, counted: every operator new and delete of
// this executable (its own, so that no other test's allocations count) goes
// through a counter of the bytes in use and their peak. Saving a checkpoint
// may add at most 1.3x its largest tensor to the checkpoint in memory;
// loading one may hold at most the checkpoint it returns and 1.3x its largest
// tensor. The counts are exact for a given build (no timing, no page
// granularity).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>

#include "hpu/core/base/file_io.h"
#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu/core/checkpoint/checkpoint_io.h"

namespace {

std::atomic<std::size_t> in_use{0}, peak{0};

// Every block carries its size (and keeps its alignment) in a header before it.
constexpr std::size_t kHeader = 64;

void* allocate(std::size_t n, std::size_t alignment) {
  const std::size_t header = std::max(kHeader, alignment);
  void* base = std::aligned_alloc(header, (n + 2 * header - 1) / header * header);
  if (base == nullptr) throw std::bad_alloc();
  auto* p = static_cast<char*>(base) + header;
  reinterpret_cast<std::size_t*>(p)[-1] = n;
  reinterpret_cast<std::size_t*>(p)[-2] = header;
  const std::size_t now = in_use.fetch_add(n) + n;
  for (std::size_t seen = peak.load(); now > seen && !peak.compare_exchange_weak(seen, now);) {
  }
  return p;
}

void release(void* p) {
  if (p == nullptr) return;
  auto* block = static_cast<char*>(p);
  in_use.fetch_sub(reinterpret_cast<std::size_t*>(block)[-1]);
  std::free(block - reinterpret_cast<std::size_t*>(block)[-2]);
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n, kHeader); }
void* operator new[](std::size_t n) { return allocate(n, kHeader); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, kHeader);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }

namespace hpu::core::checkpoint {
namespace {

using device::DType;

// The most bytes in use while `f` ran, above those in use when it started.
template <class F>
std::size_t peakGrowthOf(F&& f) {
  const std::size_t before = in_use.load();
  peak.store(before);
  f();
  return peak.load() - before;
}

// A model's checkpoint of known size: 8 MiB of fp32 weights with their 8 MiB
// of Adam state, 4 MiB of bf16 weights (2 MiB in the file), small tensors.
Checkpoint modelOfKnownSize() {
  Checkpoint c;
  const auto tensor = [&](const char* name, DType dtype, std::vector<std::int64_t> shape) {
    TensorEntry t{name, dtype, shape, {}, {}};
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    t.values.resize(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < t.values.size(); ++i) t.values[i] = static_cast<float>(i % 251) - 125.0f;
    c.tensors.push_back(std::move(t));
  };
  tensor("model.embed.weight", DType::kFloat32, {2048, 1024});
  tensor("model.head.weight", DType::kBFloat16, {1024, 1024});
  tensor("model.head.bias", DType::kFloat32, {1024});
  tensor("optimizer.exp_avg.0", DType::kFloat32, {2048, 1024});
  c.tensors.push_back({"model.positions", DType::kInt64, {1000}, {}, std::vector<std::int64_t>(1000, 7)});
  c.metadata["epoch"] = "1";
  c.metadata["config"] = std::string(10000, 'c');
  return c;
}

// Bytes of the tensors' values as a checkpoint in memory holds them.
std::size_t bytesOf(const Checkpoint& c) {
  std::size_t n = 0;
  for (const TensorEntry& t : c.tensors) n += t.values.capacity() * sizeof(float) + t.ints.capacity() * 8;
  return n;
}

std::size_t largestTensorOf(const Checkpoint& c) {
  std::size_t n = 0;
  for (const TensorEntry& t : c.tensors) n = std::max(n, t.values.size() * sizeof(float) + t.ints.size() * 8);
  return n;
}

TEST(CheckpointMemory, SavingAndLoadingHoldAtMostTheCheckpointAnd1_3xItsLargestTensor) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("hpu-ckpt-memory-" + std::to_string(::getpid()));
  const std::string path = (dir / "model.ckpt").string();
  std::unique_ptr<CheckpointIO> io = makeHPUCheckpointIO();
  const Checkpoint model = modelOfKnownSize();
  const std::size_t model_bytes = bytesOf(model), largest = largestTensorOf(model);
  ASSERT_EQ(largest, std::size_t{8} << 20);
  const std::size_t saving = peakGrowthOf([&] { io->save(model, path); });
  Checkpoint loaded;
  const std::size_t loading = peakGrowthOf([&] { loaded = io->load(path); });
  std::printf("checkpoint of %zu bytes in memory (largest tensor %zu, file %ju): saving added at most %zu bytes, "
              "loading held at most %zu\n",
              model_bytes, largest, static_cast<std::uintmax_t>(std::filesystem::file_size(path)), saving, loading);
  EXPECT_LE(saving, largest * 13 / 10);
  EXPECT_LE(loading, bytesOf(loaded) + largest * 13 / 10);
  // The same bytes as the encoder's, and the same tensors back.
  EXPECT_TRUE(readFile(path) == encodeSafetensors(model));
  ASSERT_EQ(loaded.tensors.size(), model.tensors.size());
  for (const TensorEntry& t : model.tensors) {
    const TensorEntry* back = loaded.find(t.name);
    ASSERT_NE(back, nullptr) << t.name;
    EXPECT_TRUE(back->values == t.values && back->ints == t.ints && back->shape == t.shape) << t.name;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hpu::core::checkpoint
