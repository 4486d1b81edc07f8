// Shared-memory lanes (comm/src/zmq/shm_lane.h) on their own, sender and
// receiver in one process: a message is read in place from the slot it was
// put in and only as the message numbered next; a slot in use is refused
// (the transport then uses its socket) until the message read from it is
// destroyed; the posted count wakes a sleeping receiver; memory is reserved
// as messages need it; no name is left in /dev/shm whether or not the
// receiver opened the lane.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../../comm/src/zmq/shm_lane.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

using namespace std::chrono_literals;

std::vector<std::byte> bytesOf(const std::string& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::string textOf(const Message& message) {
  const auto bytes = message.bytes();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

bool nameExists(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

class ShmLane : public ::testing::Test {
 protected:
  void SetUp() override {
    sender_ = ShmSender::create(3, 5);
    if (!sender_) GTEST_SKIP() << "no shared memory on this machine";
  }
  bool put(std::uint32_t sequence, const std::string& text) { return sender_->tryPut(sequence, bytesOf(text), {}); }
  ShmReceiver open() { return ShmReceiver(sender_->segment().name()); }

  std::unique_ptr<ShmSender> sender_;
};

TEST_F(ShmLane, MessageIsReadInPlaceAsTheOneNumberedNext) {
  EXPECT_NE(sender_->segment().name().find("-r3-to-r5"), std::string::npos) << sender_->segment().name();
  const auto header = bytesOf("HEAD");
  std::vector<std::byte> payload(200'000);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 7);
  ASSERT_TRUE(sender_->tryPut(7, header, payload));
  ShmReceiver receiver = open();
  EXPECT_EQ(receiver.tryTake(6), nullptr) << "message 7 is not message 6";
  const auto message = receiver.tryTake(7);
  ASSERT_NE(message, nullptr);
  const auto bytes = message->bytes();
  ASSERT_EQ(bytes.size(), header.size() + payload.size());
  EXPECT_EQ(std::memcmp(bytes.data(), "HEAD", 4), 0);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), bytes.begin() + 4));
  EXPECT_EQ(receiver.tryTake(8), nullptr) << "nothing more was put";
}

TEST_F(ShmLane, SlotInUseIsRefusedUntilItsMessageIsDestroyed) {
  for (std::uint32_t i = 0; i < ShmSegment::kSlots; ++i) ASSERT_TRUE(put(i, "m" + std::to_string(i)));
  EXPECT_FALSE(put(ShmSegment::kSlots, "no room")) << "every slot holds a message";

  ShmReceiver receiver = open();
  std::vector<std::unique_ptr<Message>> messages;
  for (std::uint32_t i = 0; i < ShmSegment::kSlots; ++i) messages.push_back(receiver.tryTake(i));
  EXPECT_EQ(textOf(*messages[4]), "m4");
  messages[1].reset();  // out of order: slot 0 is next in turn and still in use
  EXPECT_FALSE(put(ShmSegment::kSlots, "no room"));
  messages[0].reset();
  // Message 32 went over the socket meanwhile; 33 takes slot 0 and waits there
  // until the receiver is done with 32.
  ASSERT_TRUE(put(ShmSegment::kSlots + 1, "second round"));
  EXPECT_EQ(receiver.tryTake(ShmSegment::kSlots), nullptr);
  const auto again = receiver.tryTake(ShmSegment::kSlots + 1);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(textOf(*again), "second round");
  EXPECT_TRUE(put(ShmSegment::kSlots + 2, "slot 1"));
}

TEST_F(ShmLane, PostingWakesTheSleepingReceiver) {
  ShmReceiver receiver = open();
  ShmSegment& mine = receiver.segment();
  EXPECT_FALSE(mine.wasPosted(0));
  std::thread poster([&] {
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(put(0, "late"));
    sender_->segment().posted(0);
  });
  const auto start = std::chrono::steady_clock::now();
  while (!mine.wasPosted(0) && std::chrono::steady_clock::now() - start < 20s) mine.waitForPost(0, 10s);
  const auto waited = std::chrono::steady_clock::now() - start;
  poster.join();
  EXPECT_TRUE(mine.wasPosted(0));
  EXPECT_LT(waited, 5s) << "woken by the post, not by the 10 s timeout";
  EXPECT_FALSE(mine.wasPosted(1));
  const auto message = receiver.tryTake(0);
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(textOf(*message), "late");
}

TEST_F(ShmLane, WaitForPostReturnsAtItsTimeout) {
  ShmReceiver receiver = open();
  const auto start = std::chrono::steady_clock::now();
  receiver.segment().waitForPost(0, 50ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// Reserved memory follows the messages: a lane of small messages costs a few
// pages, not its 8 MiB of slots.
TEST_F(ShmLane, LaneReservesOnlyThePagesItsMessagesUse) {
  const auto reservedBytes = [&] {
    const int fd = ::shm_open(sender_->segment().name().c_str(), O_RDONLY, 0);
    struct stat st {};
    ::fstat(fd, &st);
    ::close(fd);
    return static_cast<std::size_t>(st.st_blocks) * 512;
  };
  EXPECT_EQ(reservedBytes(), 4096u) << "the control page";
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(put(i, "small"));
  EXPECT_EQ(reservedBytes(), 4 * 4096u);
  ASSERT_TRUE(sender_->tryPut(3, bytesOf("big"), std::vector<std::byte>(100'000)));
  EXPECT_EQ(reservedBytes(), 4 * 4096u + (100'003 + 4095) / 4096 * 4096);
}

TEST_F(ShmLane, OpeningUnlinksTheName) {
  const std::string name = sender_->segment().name();
  ASSERT_TRUE(nameExists(name));
  ShmReceiver receiver(name);
  EXPECT_FALSE(nameExists(name));
  EXPECT_THROW(ShmReceiver{name}, CommError);
}

TEST_F(ShmLane, ClosingSenderWaitsForItsReceiverToOpenTheLane) {
  const auto start = std::chrono::steady_clock::now();
  sender_->awaitReceiver(10s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "nothing was put: nothing to wait for";

  ASSERT_TRUE(put(0, "last words"));
  std::unique_ptr<Message> received;
  std::thread receiver([&, name = sender_->segment().name()] {
    std::this_thread::sleep_for(100ms);
    ShmReceiver lane(name);
    received = lane.tryTake(0);
  });
  sender_->awaitReceiver(10s);
  const auto waited = std::chrono::steady_clock::now() - start;
  sender_.reset();
  receiver.join();
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 5s);
  ASSERT_NE(received, nullptr);
  EXPECT_EQ(textOf(*received), "last words");
}

TEST_F(ShmLane, SenderUnlinksALaneItsReceiverNeverOpened) {
  ASSERT_TRUE(put(0, "never read"));
  const auto start = std::chrono::steady_clock::now();
  sender_->awaitReceiver(50ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  const std::string name = sender_->segment().name();
  ASSERT_TRUE(nameExists(name));
  sender_.reset();
  EXPECT_FALSE(nameExists(name));
}

// Found by fuzz_shm_lane: a slot line claiming more bytes than a slot holds
// (written by another process) aborted the receiver; it is an error now.
TEST_F(ShmLane, ASlotClaimingMoreBytesThanItHoldsIsAnError) {
  ShmReceiver receiver = open();
  auto& line = sender_->segment().line(0);
  line.sequence = 0;
  line.bytes = static_cast<std::uint32_t>(ShmSegment::kSlotBytes + 1);
  line.state.store(1, std::memory_order_release);
  try {
    receiver.tryTake(0);
    ADD_FAILURE() << "the corrupt slot was taken";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("is corrupt: slot 0 claims 266241 bytes, more than its 266240"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hpu::comm::detail
