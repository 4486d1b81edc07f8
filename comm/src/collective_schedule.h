// The collectives a group issued in a shape-only run (ProcessGroupOptions::
// shapeOnly), and the check that every rank of the group issued the same
// ones, in the same order, with the same sizes.
//
// Record: each collective's 40-byte wire header (collectives/descriptor.h)
// followed by its barrier name, appended in the group's order; the check
// compares BLAKE2b digests of the whole record.
//
// Check, through the job's store (the control plane, not the data plane):
// rank 0 of the group publishes its count and digest, and its record in
// pieces of at most kSchedulePieceBytes; every other rank reads the count
// and digest and, only when they differ from its own, rank 0's record up to
// the first collective that differs. Each rank reads one value per group
// when the schedules agree: start-up and checks stay linear in the world.
// Rank 0 of a group only writes and the others only read, so a rank that
// publishes for all the groups it leads before it reads never waits on one
// that waits on it.
//
// Thread-safety: not thread-safe; the group guards it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/descriptor.h"
#include "hpu/comm/store.h"

namespace hpu::comm::detail {

inline constexpr std::size_t kSchedulePieceBytes = 512u << 10;

// The store key of check number `check` of the group of the job's ranks
// `members` (in the group's order) that is the `ordinal`-th (from 0) of the
// groups with those members, in the order every member created them.
std::string scheduleKey(const std::vector<int>& members, std::size_t ordinal, std::uint64_t check);

class CollectiveSchedule {
 public:
  CollectiveSchedule();

  void record(const CollectiveDescriptor& descriptor);
  std::uint64_t count() const { return count_; }

  // Publishes this rank's record under `key` (rank 0 of the group).
  void publish(Store& store, const std::string& key, Store::Deadline deadline) const;
  // Compares this rank's record with the one rank `publisher` published
  // under `key`; returns "" when they agree, else what differs: "its
  // collective 1460 is reduce_scatter #1460 (sum, bfloat16, 234881024
  // elements) where rank 8 issued allgather #1460 (...)", or the counts when
  // one record is a prefix of the other.
  std::string compare(Store& store, const std::string& key, int publisher, Store::Deadline deadline) const;

 private:
  std::array<unsigned char, 32> digest() const;

  std::string record_;  // headers and names, in order
  std::vector<std::size_t> starts_;  // offset of each collective in record_
  std::uint64_t count_ = 0;
};

}  // namespace hpu::comm::detail
