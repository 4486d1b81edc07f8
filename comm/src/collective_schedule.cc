#include "collective_schedule.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>

#include <spdlog/fmt/fmt.h>

#include "security/sodium_init.h"

namespace hpu::comm::detail {
namespace {

// The published summary: the count (8 bytes), the digest (32), the record's
// size (8).
constexpr std::size_t kSummaryBytes = 48;

std::string pieceKey(const std::string& key, std::size_t piece) { return fmt::format("{}/piece/{}", key, piece); }

// The collective starting at `offset` of `record`, described.
std::string describeAt(std::string_view record, std::size_t offset) {
  const auto bytes = std::as_bytes(std::span(record.data() + offset, record.size() - offset));
  const auto header = decodeHeader(bytes);
  if (!header) return "an unreadable record";
  CollectiveDescriptor d = header->descriptor;
  if (header->nameBytes <= bytes.size() - kHeaderBytes)
    d.name.assign(record.data() + offset + kHeaderBytes, header->nameBytes);
  return describe(d);
}

std::size_t entryBytes(std::string_view record, std::size_t offset) {
  std::uint32_t name = 0;
  if (record.size() - offset >= kHeaderBytes) std::memcpy(&name, record.data() + offset + 32, sizeof name);
  return std::min(record.size() - offset, kHeaderBytes + name);
}

}  // namespace

std::string scheduleKey(const std::vector<int>& members, std::size_t ordinal, std::uint64_t check) {
  initSodium();
  std::array<unsigned char, 8> hash{};
  crypto_generichash(hash.data(), hash.size(), reinterpret_cast<const unsigned char*>(members.data()),
                     members.size() * sizeof(int), nullptr, 0);
  std::uint64_t id = 0;
  std::memcpy(&id, hash.data(), sizeof id);
  return fmt::format("hpu/schedule/{}/{}x{}-{:016x}/{}", check, members.size(), members.front(), id, ordinal);
}

CollectiveSchedule::CollectiveSchedule() { initSodium(); }

void CollectiveSchedule::record(const CollectiveDescriptor& descriptor) {
  CollectiveDescriptor d = descriptor;
  // An alltoall's count is what this rank sends, which differs between
  // ranks; the pairs' counts are checked where they are exchanged.
  if (d.kind == CollectiveKind::kAlltoall) d.count = 0;
  const Header header = encodeHeader(d, 0);
  starts_.push_back(record_.size());
  record_.append(reinterpret_cast<const char*>(header.data()), header.size());
  record_ += d.name;
  ++count_;
}

std::array<unsigned char, 32> CollectiveSchedule::digest() const {
  std::array<unsigned char, 32> out{};
  crypto_generichash(out.data(), out.size(), reinterpret_cast<const unsigned char*>(record_.data()), record_.size(),
                     nullptr, 0);
  return out;
}

void CollectiveSchedule::publish(Store& store, const std::string& key, Store::Deadline deadline) const {
  // Pieces first: a reader that sees the summary finds them all.
  std::size_t piece = 0;
  for (std::size_t offset = 0; offset < record_.size(); ++piece) {
    std::size_t end = offset;
    while (end < record_.size() && end + entryBytes(record_, end) - offset <= kSchedulePieceBytes)
      end += entryBytes(record_, end);
    if (end == offset) end += entryBytes(record_, end);  // a single entry larger than a piece (a long name)
    store.set(pieceKey(key, piece), std::string_view(record_).substr(offset, end - offset), deadline);
    offset = end;
  }
  std::string summary(kSummaryBytes, '\0');
  const auto d = digest();
  const std::uint64_t size = record_.size();
  std::memcpy(summary.data(), &count_, 8);
  std::memcpy(summary.data() + 8, d.data(), d.size());
  std::memcpy(summary.data() + 40, &size, 8);
  store.set(key, summary, deadline);
}

std::string CollectiveSchedule::compare(Store& store, const std::string& key, int publisher,
                                        Store::Deadline deadline) const {
  const std::string summary = store.get(key, deadline);
  if (summary.size() != kSummaryBytes) return fmt::format("rank {} published an unreadable schedule", publisher);
  std::uint64_t theirCount = 0, theirSize = 0;
  std::memcpy(&theirCount, summary.data(), 8);
  std::memcpy(&theirSize, summary.data() + 40, 8);
  const auto mine = digest();
  if (theirCount == count_ && std::memcmp(summary.data() + 8, mine.data(), mine.size()) == 0) return "";

  // They differ: read rank `publisher`'s record up to the first difference.
  std::string theirs;
  std::size_t piece = 0;
  const auto need = [&](std::size_t bytes) {
    while (theirs.size() < bytes && theirs.size() < theirSize) theirs += store.get(pieceKey(key, piece++), deadline);
  };
  for (std::size_t index = 0;; ++index) {
    const bool mineEnds = index >= starts_.size();
    const std::size_t at = mineEnds ? record_.size() : starts_[index];
    need(at + kHeaderBytes);
    if (mineEnds || at >= theirs.size()) {
      return fmt::format("this rank issued {} collective(s), rank {} issued {}; the first {} agree", count_, publisher,
                         theirCount, index);
    }
    const std::size_t n = entryBytes(record_, at);
    need(at + std::max(n, entryBytes(theirs, at)));
    if (entryBytes(theirs, at) != n || std::string_view(theirs).substr(at, n) != std::string_view(record_).substr(at, n))
      return fmt::format("its collective {} is {} where rank {} issued {}", index, describeAt(record_, at), publisher,
                         describeAt(theirs, at));
  }
}

}  // namespace hpu::comm::detail
