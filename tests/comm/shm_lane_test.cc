// Shared-memory lanes (comm/src/zmq/shm_lane.h) on their own: messages are
// read in place from the slot they were put in, a slot in use is refused
// (the transport then uses its socket) until the message read from it is
// destroyed, notices round-trip and hostile ones are refused, and no name is
// left in /dev/shm whether or not the receiver opened the lane.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <string>
#include <vector>

#include "../../comm/src/zmq/shm_lane.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

std::vector<std::byte> bytesOf(const std::string& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::string textOf(std::span<const std::byte> bytes) { return {reinterpret_cast<const char*>(bytes.data()), bytes.size()}; }

bool nameExists(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

// The lane's name, from the notice of a first message.
std::string putFirst(ShmSender& sender) {
  const auto header = bytesOf("header:");
  const auto notice = sender.tryPut(header, {});
  EXPECT_TRUE(notice.has_value());
  return notice ? notice->segment : "";
}

TEST(ShmLane, MessageIsReadInPlaceFromItsSlot) {
  auto sender = ShmSender::create(3, 5);
  ASSERT_TRUE(sender) << "no shared memory on this machine";
  const auto header = bytesOf("HEAD");
  std::vector<std::byte> payload(200'000);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 7);
  const auto notice = sender->tryPut(header, payload);
  ASSERT_TRUE(notice.has_value());
  EXPECT_EQ(notice->slot, 0u);
  EXPECT_EQ(notice->bytes, header.size() + payload.size());
  EXPECT_NE(notice->segment.find("-r3-to-r5"), std::string::npos) << notice->segment;

  const std::string wire = encodeNotice(*notice);
  const auto decoded = decodeNotice(std::as_bytes(std::span<const char>(wire)));
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->slot, notice->slot);
  EXPECT_EQ(decoded->bytes, notice->bytes);
  EXPECT_EQ(decoded->segment, notice->segment);

  auto segment = openShmSegment(decoded->segment);
  const ShmMessage message(segment, decoded->slot, decoded->bytes);
  const auto bytes = message.bytes();
  ASSERT_EQ(bytes.size(), header.size() + payload.size());
  EXPECT_EQ(textOf(bytes.first(4)), "HEAD");
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), bytes.begin() + 4));
}

TEST(ShmLane, SlotInUseIsRefusedUntilItsMessageIsDestroyed) {
  auto sender = ShmSender::create(0, 1);
  ASSERT_TRUE(sender);
  const auto header = bytesOf("h");
  std::vector<ShmNotice> notices;
  for (std::uint32_t i = 0; i < ShmSegment::kSlots; ++i) notices.push_back(sender->tryPut(header, {}).value());
  EXPECT_FALSE(sender->tryPut(header, {}).has_value()) << "every slot holds a message";

  auto segment = openShmSegment(notices[0].segment);
  std::vector<std::unique_ptr<ShmMessage>> messages;
  for (const auto& n : notices) messages.push_back(std::make_unique<ShmMessage>(segment, n.slot, n.bytes));
  messages[1].reset();  // out of order: slot 0 is next in turn and still in use
  EXPECT_FALSE(sender->tryPut(header, {}).has_value());
  messages[0].reset();
  const auto again = sender->tryPut(bytesOf("second round"), {});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->slot, 0u);
  EXPECT_EQ(textOf(ShmMessage(segment, again->slot, again->bytes).bytes()), "second round");
  EXPECT_EQ(sender->tryPut(header, {})->slot, 1u);
}

TEST(ShmLane, OpeningUnlinksTheName) {
  auto sender = ShmSender::create(0, 1);
  ASSERT_TRUE(sender);
  const std::string name = putFirst(*sender);
  ASSERT_TRUE(nameExists(name));
  auto segment = openShmSegment(name);
  EXPECT_FALSE(nameExists(name));
  EXPECT_THROW(openShmSegment(name), CommError);
}

TEST(ShmLane, SenderUnlinksALaneItsReceiverNeverOpened) {
  auto sender = ShmSender::create(0, 1);
  ASSERT_TRUE(sender);
  const std::string name = putFirst(*sender);
  ASSERT_TRUE(nameExists(name));
  sender.reset();
  EXPECT_FALSE(nameExists(name));
}

TEST(ShmLane, HostileNoticesAreRefused) {
  const auto decode = [](const ShmNotice& n) {
    const std::string wire = encodeNotice(n);
    return decodeNotice(std::as_bytes(std::span<const char>(wire)));
  };
  EXPECT_TRUE(decode({0, 10, "/hpu-train-x"}).has_value());
  EXPECT_FALSE(decode({ShmSegment::kSlots, 10, "/hpu-train-x"}).has_value()) << "slot past the lane";
  EXPECT_FALSE(decode({0, ShmSegment::kSlotBytes + 1, "/hpu-train-x"}).has_value()) << "more bytes than a slot";
  EXPECT_FALSE(decode({0, 10, ""}).has_value()) << "no segment name";
  const std::string shortWire(5, '\0');
  EXPECT_FALSE(decodeNotice(std::as_bytes(std::span<const char>(shortWire))).has_value());
}

}  // namespace
}  // namespace hpu::comm::detail
