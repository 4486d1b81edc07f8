#include "hpu/device/recipe_disk_cache.h"

#include <unistd.h>

#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <vector>

#include "hpu/device/errors.h"
#include "hpu/device/hash.h"
#include "hpu/device/text.h"

namespace hpu::device {
namespace {

constexpr std::string_view kVariable = "PT_HPU_RECIPE_CACHE_CONFIG";
constexpr std::string_view kExtension = ".recipe";

}  // namespace

RecipeCacheConfig parseRecipeCacheConfig(std::string_view value) {
  const auto bad = [&](std::string_view why) {
    return EmulatorConfigError(std::string(kVariable),
                               fmt::format("'{}' {}; expected path,delete_on_init,size_mb, e.g. "
                                           "/tmp/hpu_recipes,false,1024",
                                           value, why));
  };
  const std::vector<std::string_view> fields = detail::split(value, ',');
  if (fields.size() != 3) throw bad(fmt::format("has {} fields, not 3", fields.size()));
  RecipeCacheConfig config;
  if (fields[0].empty()) throw bad("has an empty path");
  config.directory = std::filesystem::path(std::string(fields[0]));
  const std::string flag = detail::toLower(fields[1]);
  if (flag == "true" || flag == "1")
    config.deleteOnInit = true;
  else if (flag == "false" || flag == "0")
    config.deleteOnInit = false;
  else
    throw bad(fmt::format("has delete_on_init '{}', not true or false", fields[1]));
  std::uint64_t mb = 0;
  const char* end = fields[2].data() + fields[2].size();
  auto [next, ec] = std::from_chars(fields[2].data(), end, mb);
  if (ec != std::errc() || next != end || mb == 0 || mb > (1ull << 40))
    throw bad(fmt::format("has size_mb '{}', not a positive number of megabytes", fields[2]));
  config.maxBytes = mb << 20;
  return config;
}

RecipeDiskCache::RecipeDiskCache(RecipeCacheConfig config) : config_(std::move(config)) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(config_.directory, ec);
  if (ec || !fs::is_directory(config_.directory))
    throw EmulatorConfigError(std::string(kVariable),
                              fmt::format("cannot use '{}' as the recipe cache directory: {}",
                                          config_.directory.string(),
                                          ec ? ec.message() : "not a directory"));
  if (!config_.deleteOnInit) return;
  const auto openedAt = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(config_.directory, ec)) {
    std::error_code ignored;  // another process may delete the same file
    if (entry.path().extension() == kExtension && entry.last_write_time(ignored) < openedAt)
      fs::remove(entry.path(), ignored);
  }
}

std::filesystem::path RecipeDiskCache::pathFor(std::string_view recipe) const {
  return config_.directory / fmt::format("{:016x}{}", detail::fnv1a(recipe), kExtension);
}

bool RecipeDiskCache::contains(std::string_view recipe) const {
  std::ifstream in(pathFor(recipe), std::ios::binary);
  if (!in) return false;
  const std::string stored((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return stored == recipe;
}

void RecipeDiskCache::store(std::string_view recipe) {
  namespace fs = std::filesystem;
  std::lock_guard lock(mu_);
  const fs::path target = pathFor(recipe);
  const fs::path temp = fs::path(target.string() + fmt::format(".tmp.{}.{}", ::getpid(), ++tempCounter_));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(recipe.data(), static_cast<std::streamsize>(recipe.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(temp, ignored);
      spdlog::warn("{}: cannot write recipe {}; continuing without persisting it", kVariable, temp.string());
      return;
    }
  }
  std::error_code ec;
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    spdlog::warn("{}: cannot store recipe {}: {}; continuing without persisting it", kVariable,
                 target.string(), ec.message());
    return;
  }
  evictOverLimit();
}

void RecipeDiskCache::evictOverLimit() {
  namespace fs = std::filesystem;
  struct Entry {
    fs::file_time_type written;
    std::uint64_t bytes;
    fs::path path;
  };
  std::vector<Entry> entries;
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(config_.directory, ec)) {
    if (entry.path().extension() != kExtension) continue;
    std::error_code sizeError, timeError;
    const std::uint64_t bytes = entry.file_size(sizeError);
    const auto written = entry.last_write_time(timeError);
    if (sizeError || timeError) continue;  // removed meanwhile by another process
    entries.push_back({written, bytes, entry.path()});
    total += bytes;
  }
  if (total <= config_.maxBytes) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.written < b.written; });
  for (const Entry& e : entries) {
    if (total <= config_.maxBytes) break;
    std::error_code ignored;
    fs::remove(e.path, ignored);
    total -= e.bytes;
  }
}

}  // namespace hpu::device
