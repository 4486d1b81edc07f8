// The IDX reader: plain and gzipped files, and the exact message of every
// way a file can be wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include "hpu/core/data/idx.h"
#include "idx_files.h"
#include "test_support.h"

namespace hpu::core::data {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::errorOf;
using testing::TempDir;
using testing::writeBytes;

std::string errorReading(const std::string& path, int ndim) {
  return errorOf<DataError>([&] { readIdx(path, ndim); });
}

class IdxReader : public ::testing::Test {
 protected:
  TempDir dir;
  // 2 x 3 x 4 images with bytes 0, 37, 74, ...
  std::vector<std::uint8_t> pixels = idxPattern(24);
  std::string images = idxBytes(3, {2, 3, 4}, pixels);
};

TEST_F(IdxReader, ReadsPlainAndGzippedFilesAlike) {
  writeBytes(dir.file("plain"), images);
  writeGzip(dir.file("packed.gz"), images);
  for (const std::string& path : {dir.file("plain"), dir.file("packed.gz")}) {
    SCOPED_TRACE(path);
    const IdxArray a = readIdx(path, 3);
    EXPECT_EQ(a.dims, (std::vector<std::int64_t>{2, 3, 4}));
    EXPECT_EQ(a.data, pixels);
  }
  writeBytes(dir.file("labels"), idxBytes(1, {5}, {0, 9, 3, 3, 7}));
  const IdxArray labels = readIdx(dir.file("labels"), 1);
  EXPECT_EQ(labels.dims, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(labels.data, (std::vector<std::uint8_t>{0, 9, 3, 3, 7}));
}

TEST_F(IdxReader, BadMagicNamesTheValueThePathAndTheExpectation) {
  const std::string p = dir.file("train-images-idx3-ubyte");
  writeBytes(p, idxBytes(1, {24}, pixels));
  EXPECT_EQ(errorReading(p, 3), "bad IDX magic 0x00000801 in " + p +
                                    ": expected 0x00000803 (unsigned bytes, 3 dimensions); is it an MNIST-format "
                                    "images file?");
  EXPECT_EQ(readIdx(p, 1).dims, (std::vector<std::int64_t>{24}));  // the same file is a valid 1-d array
  // A float (0x0D) IDX file is not unsigned bytes.
  std::string floats = images;
  floats[2] = 0x0D;
  writeBytes(p, floats);
  EXPECT_EQ(errorReading(p, 1), "bad IDX magic 0x00000d03 in " + p +
                                    ": expected 0x00000801 (unsigned bytes, 1 dimensions); is it an MNIST-format "
                                    "labels file?");
}

TEST_F(IdxReader, TruncatedHeaderAndData) {
  const std::string p = dir.file("t");
  writeBytes(p, "");
  EXPECT_EQ(errorReading(p, 3), p + " is empty or truncated: expected an IDX header (magic 0x00000803)");
  writeBytes(p, images.substr(0, 2));
  EXPECT_EQ(errorReading(p, 3), p + " is empty or truncated: expected an IDX header (magic 0x00000803)");
  writeBytes(p, images.substr(0, 10));  // magic and one and a half dimensions
  EXPECT_EQ(errorReading(p, 3), p + " is truncated inside its IDX header");
  writeBytes(p, images.substr(0, images.size() - 4));
  EXPECT_EQ(errorReading(p, 3), p + " is truncated: the header announces 24 bytes of data, the file has 20");
}

TEST_F(IdxReader, TrailingBytesAreRefused) {
  const std::string p = dir.file("t");
  writeBytes(p, images + "x");
  EXPECT_EQ(errorReading(p, 3), p + " has data past the 24 bytes its IDX header announces");
}

TEST_F(IdxReader, AnAbsurdSizeIsRefusedBeforeAllocating) {
  const std::string p = dir.file("t");
  writeBytes(p, idxBytes(3, {60000, 65536, 65536}, {}));
  EXPECT_EQ(errorReading(p, 3), p + ": IDX header announces 257698037760000 bytes of data; refusing");
}

TEST_F(IdxReader, CorruptGzipIsRefused) {
  const std::string good = dir.file("good.gz");
  writeGzip(good, images);
  const std::string packed = testing::readBytes(good);
  // A flipped byte inside the deflate stream, and one in the CRC trailer.
  for (std::size_t at : {packed.size() / 2, packed.size() - 6}) {
    SCOPED_TRACE("byte " + std::to_string(at));
    std::string bad = packed;
    bad[at] = static_cast<char>(bad[at] ^ 0x5A);
    const std::string p = dir.file("bad.gz");
    writeBytes(p, bad);
    EXPECT_THAT(errorReading(p, 3), StartsWith(p + " is a corrupt gzip file: "));
  }
}

TEST_F(IdxReader, TruncatedGzipIsReportedAsTruncated) {
  const std::string good = dir.file("good.gz");
  writeGzip(good, images);
  const std::string packed = testing::readBytes(good);
  const std::string p = dir.file("cut.gz");
  writeBytes(p, packed.substr(0, packed.size() - 12));
  EXPECT_THAT(errorReading(p, 3), StartsWith(p + " is truncated"));
}

TEST_F(IdxReader, MissingFile) {
  const std::string p = dir.file("absent-idx3-ubyte");
  EXPECT_EQ(errorReading(p, 3), "cannot open " + p + ": No such file or directory");
}

}  // namespace
}  // namespace hpu::core::data
