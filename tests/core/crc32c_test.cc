// CRC-32C against the check values of RFC 3720 (iSCSI), appendix B.4, and
// the catalogue's "123456789"; the mask TFRecord stores, against one worked by hand.
#include "hpu/core/base/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace hpu::core {
namespace {

TEST(Crc32cTest, MatchesRfc3720Vectors) {
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up += static_cast<char>(i);
    down += static_cast<char>(31 - i);
  }
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
}

TEST(Crc32cTest, ContinuesAcrossPieces) {
  EXPECT_EQ(crc32c("6789", crc32c("12345")), crc32c("123456789"));
}

TEST(Crc32cTest, MaskRotatesAndAddsTheTfRecordConstant) {
  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xa282ead8, mod 2^32.
  EXPECT_EQ(maskCrc32c(0xE3069283u), 0xC78AB0E5u);
}

}  // namespace
}  // namespace hpu::core
