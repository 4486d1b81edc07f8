// The checkpoint file: a safetensors round trip of every stored dtype and
// the metadata, readability by an independent minimal safetensors parser,
// refusal of truncated and altered files, and atomic writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hpu/core/base/file_io.h"
#include "hpu/core/checkpoint/checkpoint.h"
#include "hpu/core/checkpoint/checkpoint_io.h"
#include "hpu/core/checkpoint/safetensors_file.h"
#include "hpu/device/numerics.h"
#include "test_support.h"

namespace hpu::core::checkpoint {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using device::DType;
using testing::errorOf;
using testing::readBytes;
using testing::TempDir;
using testing::writeBytes;

Checkpoint sample() {
  Checkpoint c;
  c.tensors.push_back({"model.fc.weight", DType::kFloat32, {2, 3}, {1.5f, -2.25f, 3.0e-8f, 0.0f, -0.0f, 1e30f}, {}});
  // Values exactly representable in their dtypes.
  c.tensors.push_back({"model.fc.bias", DType::kBFloat16, {4}, {1.0f, -0.5f, 3.140625f, 65536.0f}, {}});
  c.tensors.push_back({"optimizer.exp_avg.0", DType::kFloat16, {3}, {0.5f, -1.25f, 2048.0f}, {}});
  c.tensors.push_back({"model.embedding.ids", DType::kInt64, {5}, {}, {0, -7, std::int64_t{1} << 40, INT64_MAX, INT64_MIN}});
  c.tensors.push_back({"model.empty", DType::kFloat32, {0, 4}, {}, {}});
  c.tensors.push_back({"model.scalar", DType::kFloat32, {}, {42.0f}, {}});
  c.metadata["epoch"] = "3";
  c.metadata["config"] = "model:\n  class_path: \"MLP\"\n  name: 'naïve ✓'\n\ttab\\back";
  c.metadata["decoy"] = "\"hpu_train.crc32\":\"00000000\"";
  return c;
}

void expectEqual(const Checkpoint& a, const Checkpoint& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const TensorEntry& t : a.tensors) {
    SCOPED_TRACE(t.name);
    const TensorEntry* u = b.find(t.name);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->dtype, t.dtype);
    EXPECT_EQ(u->shape, t.shape);
    ASSERT_EQ(u->values.size(), t.values.size());
    for (std::size_t i = 0; i < t.values.size(); ++i)
      EXPECT_EQ(std::memcmp(&u->values[i], &t.values[i], 4), 0) << "bitwise, element " << i;
    EXPECT_EQ(u->ints, t.ints);
  }
  EXPECT_EQ(a.metadata, b.metadata);
}

TEST(Safetensors, RoundTripOfEveryDTypeAndTheMetadata) {
  const Checkpoint c = sample();
  const Checkpoint back = decodeSafetensors(encodeSafetensors(c), "mem");
  expectEqual(c, back);
  EXPECT_EQ(back.metadata.count("hpu_train.crc32"), 0u) << "the checksum is consumed, not returned";
  EXPECT_EQ(back.meta("epoch"), "3");
  EXPECT_EQ(errorOf<CheckpointError>([&] { back.meta("step"); }), "checkpoint has no 'step' entry");
  EXPECT_EQ(back.find("absent"), nullptr);
}

// Found by fuzz_safetensors (UndefinedBehaviorSanitizer): an empty float32 or
// int64 tensor was copied into an empty vector through its null data().
TEST(Safetensors, EmptyTensorsRoundTrip) {
  Checkpoint c;
  c.tensors.push_back({"optimizer.exp_avg.0", DType::kFloat32, {0}, {}, {}});
  c.tensors.push_back({"model.ids", DType::kInt64, {2, 0}, {}, {}});
  c.tensors.push_back({"model.half", DType::kBFloat16, {0, 3}, {}, {}});
  expectEqual(c, decodeSafetensors(encodeSafetensors(c), "mem"));
}

TEST(Safetensors, UnsupportedDTypesAreRefused) {
  Checkpoint c;
  c.tensors.push_back({"x", DType::kFloat8E4M3, {1}, {1.0f}, {}});
  EXPECT_THAT(errorOf<CheckpointError>([&] { encodeSafetensors(c); }), StartsWith("cannot store a "));
}

// An independent reading of the format, as any safetensors library does it:
// u64 little-endian header size N, N bytes of JSON (a '{' first, space
// padding allowed), then the byte buffer; every tensor's data_offsets are
// relative to the buffer, match dtype x shape, and together tile it exactly.
TEST(Safetensors, ReadableByAPlainSafetensorsParser) {
  const Checkpoint c = sample();
  const std::string bytes = encodeSafetensors(c);
  ASSERT_GE(bytes.size(), 8u);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "the buffer starts 8-byte aligned";
  const std::string header_text = bytes.substr(8, n);
  ASSERT_EQ(header_text.front(), '{');
  const nlohmann::json header = nlohmann::json::parse(header_text);
  const std::string buffer = bytes.substr(8 + n);

  ASSERT_TRUE(header.contains("__metadata__"));
  for (const auto& [k, v] : header["__metadata__"].items()) EXPECT_TRUE(v.is_string()) << k;
  EXPECT_EQ(header["__metadata__"]["config"], c.metadata.at("config"));

  const std::map<std::string, std::uint64_t> width = {{"F32", 4}, {"BF16", 2}, {"F16", 2}, {"I64", 8}};
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    SCOPED_TRACE(name);
    const std::string dtype = info.at("dtype");
    ASSERT_TRUE(width.count(dtype)) << dtype;
    std::uint64_t numel = 1;
    for (std::uint64_t d : info.at("shape")) numel *= d;
    const std::uint64_t begin = info.at("data_offsets")[0], end = info.at("data_offsets")[1];
    EXPECT_EQ(end - begin, numel * width.at(dtype));
    spans.emplace_back(begin, end);
  }
  EXPECT_EQ(spans.size(), c.tensors.size());
  std::sort(spans.begin(), spans.end());
  std::uint64_t at = 0;
  for (const auto& [b, e] : spans) {
    EXPECT_EQ(b, at) << "no gap or overlap";
    at = e;
  }
  EXPECT_EQ(at, buffer.size()) << "the tensors cover the buffer exactly";

  // Raw little-endian values.
  auto raw = [&](const std::string& name) {
    const auto& o = header[name]["data_offsets"];
    return buffer.substr(o[0].get<std::size_t>(), o[1].get<std::size_t>() - o[0].get<std::size_t>());
  };
  const std::string w = raw("model.fc.weight");
  for (std::size_t i = 0; i < 6; ++i) {
    std::uint32_t bits = 0;
    for (int b = 3; b >= 0; --b) bits = (bits << 8) | static_cast<unsigned char>(w[4 * i + static_cast<std::size_t>(b)]);
    float v;
    std::memcpy(&v, &bits, 4);
    EXPECT_EQ(std::memcmp(&v, &c.tensors[0].values[i], 4), 0) << "F32 element " << i;
  }
  const std::string bf = raw("model.fc.bias");
  for (std::size_t i = 0; i < 4; ++i) {
    std::uint32_t f32;
    std::memcpy(&f32, &c.tensors[1].values[i], 4);
    const auto bits = static_cast<std::uint16_t>(static_cast<unsigned char>(bf[2 * i]) |
                                                 static_cast<unsigned char>(bf[2 * i + 1]) << 8);
    EXPECT_EQ(bits, f32 >> 16) << "BF16 is the top half of the float32, element " << i;
  }
  const std::string ids = raw("model.embedding.ids");
  for (std::size_t i = 0; i < 5; ++i) {
    std::uint64_t u = 0;
    for (int b = 7; b >= 0; --b) u = (u << 8) | static_cast<unsigned char>(ids[8 * i + static_cast<std::size_t>(b)]);
    EXPECT_EQ(static_cast<std::int64_t>(u), c.tensors[3].ints[i]) << "I64 element " << i;
  }
}

TEST(Safetensors, TruncatedFilesAreRefused) {
  const std::string bytes = encodeSafetensors(sample());
  EXPECT_EQ(errorOf<CheckpointError>([&] { decodeSafetensors(bytes.substr(0, 5), "f.ckpt"); }),
            "f.ckpt is not a valid checkpoint: 5 bytes is shorter than the 8-byte header length");
  EXPECT_THAT(errorOf<CheckpointError>([&] { decodeSafetensors(bytes.substr(0, 40), "f.ckpt"); }),
              HasSubstr("f.ckpt is not a valid checkpoint: header length "));
  EXPECT_THAT(errorOf<CheckpointError>([&] { decodeSafetensors(bytes.substr(0, bytes.size() - 1), "f.ckpt"); }),
              HasSubstr("the file was altered or truncated"));
  // Every shorter prefix is refused.
  for (std::size_t len = 0; len < bytes.size(); ++len)
    EXPECT_THROW(decodeSafetensors(bytes.substr(0, len), "f.ckpt"), CheckpointError) << "prefix of " << len << " bytes";
}

TEST(Safetensors, AFlippedByteInTheDataOrTheHeaderIsRefused) {
  const std::string bytes = encodeSafetensors(sample());
  std::string data_flip = bytes;
  data_flip[bytes.size() - 3] ^= 0x10;
  EXPECT_THAT(errorOf<CheckpointError>([&] { decodeSafetensors(data_flip, "f.ckpt"); }),
              ::testing::MatchesRegex("f\\.ckpt is not a valid checkpoint: checksum mismatch \\(stored [0-9a-f]{8}, "
                                      "computed [0-9a-f]{8}\\): the file was altered or truncated"));
  std::string header_flip = bytes;
  const std::size_t epoch_value = bytes.find("\"epoch\":\"3\"") + 9;
  header_flip[epoch_value] = '4';
  EXPECT_THAT(errorOf<CheckpointError>([&] { decodeSafetensors(header_flip, "f.ckpt"); }),
              HasSubstr("checksum mismatch"));
  std::string syntax_flip = bytes;
  syntax_flip[8] = '[';
  EXPECT_THAT(errorOf<CheckpointError>([&] { decodeSafetensors(syntax_flip, "f.ckpt"); }),
              StartsWith("f.ckpt is not a valid checkpoint: corrupt header: "));
}

TEST(Safetensors, AFileWithoutTheChecksumIsRefused) {
  // A plain safetensors file (as another tool writes it) cannot prove it is intact.
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  bytes += header + std::string(4, '\0');
  EXPECT_EQ(errorOf<CheckpointError>([&] { decodeSafetensors(bytes, "plain.safetensors"); }),
            "plain.safetensors is not a valid checkpoint: no hpu_train.crc32 checksum in its metadata (not written by "
            "hpu-train, or altered)");
}

TEST(Safetensors, AHeaderWhoseShapeOrOffsetsAreNotIntegersIsRefused) {
  // Fractions, exponents past any integer and negative offsets are refused
  // with the tensor named, never converted.
  const auto error = [](const std::string& shape, const std::string& offsets) {
    std::map<std::string, std::string> metadata;
    const std::string header =
        R"({"w":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
    return errorOf<CheckpointError>([&] { checkpoint::parseSafetensorsHeader(header, 16, "h.safetensors", metadata); });
  };
  EXPECT_EQ(error("[2.5]", "[0,8]"),
            "h.safetensors is not a valid safetensors file: tensor 'w' has shape [2.5] (not a list of integers)");
  EXPECT_EQ(error("[1e300]", "[0,8]"),
            "h.safetensors is not a valid safetensors file: tensor 'w' has shape [1e+300] (not a list of integers)");
  EXPECT_EQ(error("[2]", "[0,2.43333e+32]"),
            "h.safetensors is not a valid safetensors file: tensor 'w' has data offsets [0,2.43333e+32] outside the 16 "
            "data bytes or not matching its shape");
  EXPECT_EQ(error("[2]", "[-8,0]"),
            "h.safetensors is not a valid safetensors file: tensor 'w' has data offsets [-8,0] outside the 16 data bytes "
            "or not matching its shape");
  std::map<std::string, std::string> metadata;
  const auto tensors = checkpoint::parseSafetensorsHeader(
      R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16, "h.safetensors", metadata);
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].begin, 8u);
  EXPECT_EQ(tensors[0].end, 16u);
}

// Any single corrupted byte anywhere in the file is refused, including the
// name of the checksum entry itself.
TEST(Safetensors, EverySingleByteCorruptionIsRefused) {
  Checkpoint c;
  c.tensors.push_back({"w", DType::kFloat32, {3}, {1.0f, 2.0f, 3.0f}, {}});
  c.metadata["epoch"] = "1";
  const std::string bytes = encodeSafetensors(c);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    for (unsigned char mask : {0x01, 0x20, 0x80}) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      EXPECT_THROW(decodeSafetensors(bad, "f.ckpt"), CheckpointError)
          << "byte " << i << " ('" << bytes[i] << "') xor " << int{mask};
    }
}

TEST(CheckpointFiles, WriteFileAtomicallyCreatesDirectoriesAndLeavesNoTemporaryFile) {
  TempDir dir;
  const std::string path = (dir.path() / "runs" / "v0" / "last.ckpt").string();
  writeFileAtomically(path, "first");
  EXPECT_EQ(readFile(path), "first");
  EXPECT_EQ(testing::TempDir::entriesOf(dir.path() / "runs" / "v0"), std::vector<std::string>{"last.ckpt"});
}

TEST(CheckpointFiles, ReplacingIsARenameNotAnInPlaceRewrite) {
  TempDir dir;
  const std::string path = dir.file("last.ckpt");
  writeFileAtomically(path, "old contents");
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  std::ifstream reader(path, std::ios::binary);  // a reader of the old file
  writeFileAtomically(path, "new");
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(before.st_ino, after.st_ino) << "a new file took the name";
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(reader), {}), "old contents")
      << "the old file was never truncated or rewritten";
  EXPECT_EQ(readFile(path), "new");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"last.ckpt"});
}

TEST(CheckpointFiles, FailuresNameThePathAndCleanUp) {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "taken");
  const std::string taken = dir.file("taken");
  EXPECT_THAT(errorOf<CheckpointError>([&] { writeFileAtomically(taken, "x"); }),
              ::testing::AllOf(StartsWith("cannot rename "), HasSubstr(" to " + taken + ": ")));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"taken"}) << "the temporary file is removed";

  writeBytes(dir.file("plain"), "");
  const std::string under_file = dir.file("plain") + "/sub/x.ckpt";
  EXPECT_THAT(errorOf<CheckpointError>([&] { writeFileAtomically(under_file, "x"); }),
              StartsWith("cannot create directory " + dir.file("plain") + "/sub: "));
  const std::string absent = dir.file("absent.ckpt");
  EXPECT_EQ(errorOf<CheckpointError>([&] { readFile(absent); }), "cannot read " + absent + ": No such file or directory");
}

TEST(CheckpointFiles, HPUCheckpointIOSavesLoadsAndRemoves) {
  TempDir dir;
  auto io = makeHPUCheckpointIO();
  const std::string path = dir.file("epoch=0-step=10.ckpt");
  io->save(sample(), path);
  expectEqual(sample(), io->load(path));
  std::string bytes = readBytes(path);
  bytes[bytes.size() / 2] ^= 0x01;
  writeBytes(path, bytes);
  EXPECT_THAT(errorOf<CheckpointError>([&] { io->load(path); }), StartsWith(path + " is not a valid checkpoint: "));
  io->remove(path);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(errorOf<CheckpointError>([&] { io->load(path); }), "checkpoint " + path + " does not exist");
}

}  // namespace
}  // namespace hpu::core::checkpoint
