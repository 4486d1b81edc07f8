// The on-disk recipe cache (PT_HPU_RECIPE_CACHE_CONFIG=path,delete_on_init,size_mb):
// compiled recipes persist in a directory so that another process (a second
// run, or another local rank) finds them and skips the compilation.
//
// Each recipe is one file, "<hash>.recipe", holding the recipe's text
// (GraphRecord::serialize() with the target and mode in front); a lookup
// matches the whole text, so a hash collision is a miss, never a wrong hit.
// Files are written to a temporary name and renamed, so concurrent processes
// never read a partial recipe. When the directory's recipes exceed size_mb the
// least recently written are deleted. delete_on_init removes the recipes
// written before this process opened the cache.
//
// Thread-safe: the devices of a process share one instance.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>

namespace hpu::device {

struct RecipeCacheConfig {
  std::filesystem::path directory;
  bool deleteOnInit = false;
  std::uint64_t maxBytes = 0;  // size_mb * 2^20
};

// Parses "path,delete_on_init,size_mb": delete_on_init is true/false (any
// case) or 1/0, size_mb a positive integer. Throws EmulatorConfigError naming
// PT_HPU_RECIPE_CACHE_CONFIG.
RecipeCacheConfig parseRecipeCacheConfig(std::string_view value);

class RecipeDiskCache {
 public:
  // Creates the directory if needed; throws DeviceError if it is unusable.
  explicit RecipeDiskCache(RecipeCacheConfig config);
  const RecipeCacheConfig& config() const { return config_; }

  bool contains(std::string_view recipe) const;
  // Persists a recipe. A failed write (disk full, permissions) is logged as a
  // warning and otherwise ignored: the cache only saves compilations.
  void store(std::string_view recipe);

 private:
  std::filesystem::path pathFor(std::string_view recipe) const;
  void evictOverLimit();  // REQUIRES: mu_ held

  RecipeCacheConfig config_;
  mutable std::mutex mu_;
  std::uint64_t tempCounter_ = 0;
};

}  // namespace hpu::device
