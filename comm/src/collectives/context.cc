#include "context.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include <spdlog/fmt/fmt.h>

#include "../check.h"
#include "../duration_text.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {

CollectiveContext::CollectiveContext(Transport& transport, const CollectiveDescriptor& descriptor,
                                     Transport::Deadline deadline, std::chrono::milliseconds timeout,
                                     std::size_t chunkBytes)
    : transport_(transport),
      descriptor_(descriptor),
      deadline_(deadline),
      timeout_(timeout),
      chunkBytes_(chunkBytes),
      rank_(transport.rank()),
      members_(static_cast<std::size_t>(transport.size())),
      position_(rank_),
      links_(std::make_shared<Links>()) {
  std::iota(members_.begin(), members_.end(), 0);
  links_->sendSteps.assign(members_.size(), 0);
  links_->recvSteps.assign(members_.size(), 0);
  links_->prefix.resize(kHeaderBytes + descriptor.name.size());
  std::memcpy(links_->prefix.data() + kHeaderBytes, descriptor.name.data(), descriptor.name.size());
}

CollectiveContext::~CollectiveContext() {
  if (links_.use_count() != 1) return;
  if (links_->expecting) transport_.forgetExpectations();
  if (links_->posting) transport_.ownPosted();
}

void CollectiveContext::flushSends() {
  try {
    transport_.flushSends(deadline_);
  } catch (const PeerLostError& e) {
    throw failedWith(e);
  } catch (const CommTimeoutError& e) {
    throw CommTimeoutError(fmt::format("rank {}: {} timed out after {}: {} (raise the timeout with "
                                       "HPU_COLLECTIVE_TIMEOUT)",
                                       rank_, describe(descriptor_), durationText(timeout_), e.what()));
  }
  links_->posting = false;
}

void CollectiveContext::expectPayload(int position, std::span<std::byte> destination) {
  links_->expecting = true;
  transport_.expect(global(position), kHeaderBytes + descriptor_.name.size(), destination);
}

CollectiveContext CollectiveContext::subgroup(std::vector<int> members) const {
  const auto self = std::find(members.begin(), members.end(), rank_);
  HPU_COMM_CHECK(self != members.end(), "a subgroup must contain the rank that runs it");
  CollectiveContext sub = *this;
  sub.position_ = static_cast<int>(self - members.begin());
  sub.members_ = std::move(members);
  return sub;
}

bool CollectiveContext::sendMessage(int position, std::optional<std::uint64_t> block,
                                    std::span<const std::byte> payload, bool post) {
  const int peer = global(position);
  const Header header = encodeHeader(descriptor_, links_->sendSteps[static_cast<std::size_t>(peer)]++,
                                     block.value_or(descriptor_.count));
  std::copy(header.begin(), header.end(), links_->prefix.begin());
  try {
    if (post && transport_.post(peer, links_->prefix, payload, deadline_)) {
      links_->posting = true;
      return true;
    }
    if (!post) transport_.send(peer, links_->prefix, payload, deadline_);
  } catch (const CommError&) {
    rethrowWithContext(peer);
  }
  return false;
}

Received CollectiveContext::receiveMessage(int position, std::optional<std::uint64_t> block,
                                           std::size_t expectedBytes, Transport::Deadline deadline) {
  const int peer = global(position);
  Received received;
  try {
    received.message = transport_.recv(peer, deadline);
  } catch (const CommError&) {
    rethrowWithContext(peer);
  }
  const auto bytes = received.message->bytes();
  const auto placed = received.message->placedPayload();
  const auto header = decodeHeader(bytes);
  if (!header) {
    throw CommError(fmt::format("rank {}: {}: malformed message of {} bytes from rank {}", rank_,
                                describe(descriptor_), bytes.size(), peer));
  }
  CollectiveDescriptor theirs = header->descriptor;
  const auto rest = bytes.subspan(kHeaderBytes);
  if (header->nameBytes > rest.size()) {
    throw CommError(fmt::format("rank {}: {}: malformed message of {} bytes from rank {}: its name claims {} bytes",
                                rank_, describe(descriptor_), bytes.size(), peer, header->nameBytes));
  }
  theirs.name.assign(reinterpret_cast<const char*>(rest.data()), header->nameBytes);
  const std::uint64_t theirCount = std::exchange(theirs.count, descriptor_.count);
  const bool sameCollective = theirs == descriptor_;
  theirs.count = theirCount;
  if (sameCollective && block && theirCount != *block) {
    throw CollectiveMismatchError(fmt::format(
        "rank {}: {}: rank {} sends {} elements to rank {}, which expects {} from it; rank s's send count for rank "
        "d must equal rank d's receive count from rank s",
        rank_, describe(descriptor_), peer, theirCount, rank_, *block));
  }
  if (!sameCollective || theirCount != block.value_or(descriptor_.count)) {
    throw CollectiveMismatchError(fmt::format(
        "rank {}: {} does not match rank {}'s {}; every rank must call the same collectives in the same order with "
        "the same sizes, ops and roots",
        rank_, describe(descriptor_), peer, describe(theirs)));
  }
  const std::uint32_t expectedStep = links_->recvSteps[static_cast<std::size_t>(peer)]++;
  if (header->step != expectedStep) {  // our own ranks send in step: the message is corrupt or foreign
    throw CommError(fmt::format("rank {}: {}: message {} from rank {} arrived where message {} was due", rank_,
                                describe(descriptor_), header->step, peer, expectedStep));
  }
  received.payload = placed ? *placed : rest.subspan(header->nameBytes);
  if (received.payload.size() != expectedBytes) {
    throw CommError(fmt::format("rank {}: {}: message {} from rank {} carries {} bytes, expected {}", rank_,
                                describe(descriptor_), header->step, peer, received.payload.size(), expectedBytes));
  }
  return received;
}

void CollectiveContext::checkAlive() const {
  try {
    transport_.checkHealth();
  } catch (const PeerLostError& e) {
    throw failedWith(e);
  }
  if (Transport::Clock::now() >= deadline_)
    throw CommTimeoutError(fmt::format("rank {}: {} timed out after {}; a rank skipped this collective or is still "
                                       "busy elsewhere (raise the timeout with HPU_COLLECTIVE_TIMEOUT)",
                                       rank_, describe(descriptor_), durationText(timeout_)));
}

std::size_t CollectiveContext::chunksFor(std::size_t elements) const {
  const std::size_t bytes = elements * elementSize();
  std::size_t chunks = (bytes + chunkBytes_ - 1) / chunkBytes_;
  chunks = std::clamp<std::size_t>(chunks, 1, kMaxChunksPerStep);
  if ((bytes + chunks - 1) / chunks > kMaxMessagePayload) {
    throw CommError(fmt::format("rank {}: {}: a block of {} bytes is too large to stream ({} chunks of at most {} "
                                "bytes); split the buffer",
                                rank_, describe(descriptor_), bytes, kMaxChunksPerStep, kMaxMessagePayload));
  }
  return chunks;
}

Range CollectiveContext::chunkOf(Range block, std::size_t chunks, std::size_t index) {
  const Range sub = ProcessGroup::shardRange(block.size, static_cast<int>(chunks), static_cast<int>(index));
  return {block.offset + sub.offset, sub.size};
}

PeerLostError CollectiveContext::failedWith(const PeerLostError& e) const {
  return PeerLostError(e.rank(), fmt::format("rank {}: {} failed: {}", rank_, describe(descriptor_), e.what()));
}

void CollectiveContext::rethrowWithContext(int peer) const {
  try {
    throw;
  } catch (const PeerLostError& e) {
    throw failedWith(e);
  } catch (const CommTimeoutError&) {
    throw CommTimeoutError(fmt::format(
        "rank {}: {} timed out after {} waiting for rank {}; a rank skipped this collective or is still busy "
        "elsewhere (raise the timeout with HPU_COLLECTIVE_TIMEOUT)",
        rank_, describe(descriptor_), durationText(timeout_), peer));
  }
}

}  // namespace hpu::comm::detail
