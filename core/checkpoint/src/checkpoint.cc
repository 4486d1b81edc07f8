#include "hpu/core/checkpoint/checkpoint.h"

#include <spdlog/fmt/fmt.h>
#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <numeric>
#include <span>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/checkpoint/safetensors_file.h"
#include "hpu/device/numerics.h"

namespace hpu::core::checkpoint {
namespace {

using device::DType;
using nlohmann::json;

constexpr const char* kCrcKey = "hpu_train.crc32";

const char* safetensorsDType(DType t) {
  switch (t) {
    case DType::kFloat32: return "F32";
    case DType::kBFloat16: return "BF16";
    case DType::kFloat16: return "F16";
    case DType::kInt64: return "I64";
    default: return nullptr;
  }
}

// Bytes are encoded, decoded and checksummed in pieces of at most this
// size: what a file's reader and writer hold besides the checkpoint itself.
constexpr std::size_t kPiece = 1u << 20;

std::uint32_t crcUpdate(std::uint32_t crc, std::string_view bytes) {
  uLong c = crc;
  for (std::size_t done = 0; done < bytes.size();) {
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(bytes.size() - done, 1u << 30));
    c = crc32(c, reinterpret_cast<const Bytef*>(bytes.data() + done), chunk);
    done += chunk;
  }
  return static_cast<std::uint32_t>(c);
}

std::uint32_t crcStart() { return static_cast<std::uint32_t>(crc32(0L, Z_NULL, 0)); }

std::uint64_t storedBytes(const TensorEntry& t) {
  switch (t.dtype) {
    case DType::kFloat32: return t.values.size() * 4;
    case DType::kBFloat16:
    case DType::kFloat16: return t.values.size() * 2;
    case DType::kInt64: return t.ints.size() * 8;
    default: return 0;
  }
}

// Where an encoded file goes: appended in order; `overwrite` puts the
// checksum into the header once the data has passed.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(std::string_view bytes) = 0;
  virtual void overwrite(std::uint64_t offset, std::string_view bytes) = 0;
};

class StringSink final : public ByteSink {
 public:
  void write(std::string_view bytes) override { out.append(bytes); }
  void overwrite(std::uint64_t offset, std::string_view bytes) override {
    out.replace(static_cast<std::size_t>(offset), bytes.size(), bytes);
  }
  std::string out;
};

class FileSink final : public ByteSink {
 public:
  explicit FileSink(AtomicFile& file) : file_(file) {}
  void write(std::string_view bytes) override { file_.write(bytes); }
  void overwrite(std::uint64_t offset, std::string_view bytes) override { file_.overwrite(offset, bytes); }

 private:
  AtomicFile& file_;
};

// The file format of checkpoint.h into `sink`: the header (offsets from
// the tensors' sizes, the checksum field zero), then each tensor's bytes as
// they are encoded, then the checksum of all of it into its field.
void encodeInto(const Checkpoint& ckpt, ByteSink& sink) {
  json header = json::object();
  std::uint64_t end = 0;
  for (const TensorEntry& t : ckpt.tensors) {
    const char* dt = safetensorsDType(t.dtype);
    if (dt == nullptr) throw CheckpointError("cannot store a " + std::string(device::dtypeName(t.dtype)) + " tensor");
    const std::uint64_t begin = end;
    end += storedBytes(t);
    header[t.name] = {{"dtype", dt}, {"shape", t.shape}, {"data_offsets", {begin, end}}};
  }
  json meta = json::object();
  for (const auto& [k, v] : ckpt.metadata) meta[k] = v;
  meta[kCrcKey] = "00000000";
  header["__metadata__"] = meta;
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');  // align data as the format recommends
  std::string head(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) head[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  const std::string placeholder = std::string("\"") + kCrcKey + "\":\"00000000\"";
  const std::uint64_t digits = 8 + text.find(placeholder) + placeholder.size() - 9;
  head += text;
  std::uint32_t crc = crcUpdate(crcStart(), head);
  sink.write(head);
  const auto put = [&](std::string_view bytes) {
    crc = crcUpdate(crc, bytes);
    sink.write(bytes);
  };
  std::string piece;
  piece.reserve(kPiece);
  for (const TensorEntry& t : ckpt.tensors) {
    if (t.dtype == DType::kFloat32 || t.dtype == DType::kInt64) {
      const char* bytes = t.dtype == DType::kFloat32 ? reinterpret_cast<const char*>(t.values.data())
                                                     : reinterpret_cast<const char*>(t.ints.data());
      const auto size = static_cast<std::size_t>(storedBytes(t));
      for (std::size_t at = 0; at < size; at += kPiece) put(std::string_view(bytes + at, std::min(kPiece, size - at)));
      continue;
    }
    for (std::size_t at = 0; at < t.values.size(); at += kPiece / 2) {
      piece.clear();
      for (std::size_t i = at; i < std::min(t.values.size(), at + kPiece / 2); ++i) {
        const std::uint16_t bits =
            t.dtype == DType::kBFloat16 ? device::toBFloat16Bits(t.values[i]) : device::toFloat16Bits(t.values[i]);
        piece.push_back(static_cast<char>(bits & 0xff));
        piece.push_back(static_cast<char>(bits >> 8));
      }
      put(piece);
    }
  }
  sink.overwrite(digits, fmt::format("{:08x}", crc));
}

}  // namespace

const TensorEntry* Checkpoint::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<OptimizerStateName> parseOptimizerStateName(const std::string& tensor_name) {
  constexpr std::string_view kPrefix = "optimizer.";
  const std::size_t dot = tensor_name.rfind('.');
  if (!tensor_name.starts_with(kPrefix) || dot <= kPrefix.size() || dot + 1 == tensor_name.size()) return std::nullopt;
  OptimizerStateName out{tensor_name.substr(kPrefix.size(), dot - kPrefix.size())};
  const char* end = tensor_name.data() + tensor_name.size();
  const auto [ptr, ec] = std::from_chars(tensor_name.data() + dot + 1, end, out.slice);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return out;
}

const std::string& Checkpoint::meta(const std::string& key) const {
  auto it = metadata.find(key);
  if (it == metadata.end()) throw CheckpointError("checkpoint has no '" + key + "' entry");
  return it->second;
}

std::string shardPath(const std::string& checkpoint, int rank) { return checkpoint + ".rank" + std::to_string(rank); }

std::string encodeSafetensors(const Checkpoint& ckpt) {
  StringSink sink;
  encodeInto(ckpt, sink);
  return std::move(sink.out);
}

void writeSafetensorsFile(const Checkpoint& ckpt, const std::string& path) {
  AtomicFile file(path);
  FileSink sink(file);
  encodeInto(ckpt, sink);
  file.commit();
}

namespace {

CheckpointError invalid(const std::string& origin, const std::string& why) {
  return CheckpointError(fmt::format("{} is not a valid checkpoint: {}", origin, why));
}

// Where a file's bytes are read from, in pieces.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual std::uint64_t size() const = 0;
  // Bytes [offset, offset + out.size()). REQUIRES: they lie within size().
  virtual void read(std::uint64_t offset, std::span<char> out) = 0;
};

class StringSource final : public ByteSource {
 public:
  explicit StringSource(std::string_view bytes) : bytes_(bytes) {}
  std::uint64_t size() const override { return bytes_.size(); }
  void read(std::uint64_t offset, std::span<char> out) override {
    std::copy_n(bytes_.data() + offset, out.size(), out.data());
  }

 private:
  std::string_view bytes_;
};

class FileSource final : public ByteSource {
 public:
  // `what` names the file in messages ("cannot read <what><path>: ...").
  FileSource(const std::string& path, std::string_view what)
      : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st {};
    if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
      const int err = errno;
      if (fd_ >= 0) ::close(fd_);
      throw CheckpointError(fmt::format("cannot read {}{}: {}", what, path, std::strerror(err)));
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::span<char> out) override {
    for (std::size_t done = 0; done < out.size();) {
      const ssize_t r = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw CheckpointError(fmt::format("cannot read {}: {}", path_, std::strerror(errno)));
      if (r == 0) throw invalid(path_, "it was truncated while being read");
      done += static_cast<std::size_t>(r);
    }
  }

 private:
  std::string path_;
  int fd_;
  std::uint64_t size_ = 0;
};

// A file's header: its length's 8 bytes and its JSON text.
struct Header {
  std::string first8, text;
  std::uint64_t dataSize(std::uint64_t file_size) const { return file_size - 8 - text.size(); }
};

Header readHeader(ByteSource& source, const std::string& origin) {
  Header h;
  h.first8.resize(static_cast<std::size_t>(std::min<std::uint64_t>(source.size(), 8)));
  source.read(0, h.first8);
  h.text.resize(static_cast<std::size_t>(safetensorsHeaderLength(h.first8, source.size(), origin, "checkpoint")));
  source.read(8, h.text);
  return h;
}

// Bytes [offset, offset + count) of the stored data of `t` (of dtype
// t.dtype) into its values: 16-bit elements widened, one split between two
// pieces waiting in `pending` for its second byte.
void fill(TensorEntry& t, std::uint64_t offset, const unsigned char* bytes, std::size_t count, unsigned char& pending) {
  if (t.dtype == DType::kFloat32 || t.dtype == DType::kInt64) {
    char* to = t.dtype == DType::kFloat32 ? reinterpret_cast<char*>(t.values.data()) : reinterpret_cast<char*>(t.ints.data());
    std::memcpy(to + offset, bytes, count);
    return;
  }
  std::size_t used = 0;
  if (offset % 2 == 1) {
    const unsigned char element[2] = {pending, bytes[0]};
    widenToFloat(t.dtype, element, std::span<float>(&t.values[static_cast<std::size_t>(offset / 2)], 1));
    used = 1;
  }
  widenToFloat(t.dtype, bytes + used,
               std::span<float>(t.values.data() + (offset + used) / 2, (count - used) / 2));
  if ((count - used) % 2 == 1) pending = bytes[count - 1];
}

// The file format of checkpoint.h from `source`: the header, then the data
// in pieces of kPiece bytes, each checksummed and copied into the tensors it
// overlaps as it passes. The checkpoint is returned once the whole file's
// checksum matches.
Checkpoint decodeFrom(ByteSource& source, const std::string& origin) {
  auto bad = [&](const std::string& why) { return invalid(origin, why); };
  const Header header = readHeader(source, origin);
  const std::uint64_t data_size = header.dataSize(source.size());
  Checkpoint ckpt;
  // A tensor table that does not fit the bytes is reported as the checksum's
  // failure when the checksum fails too (a truncated or altered file).
  std::vector<SafetensorsTensor> entries;
  std::exception_ptr table_error;
  try {
    entries = parseSafetensorsHeader(header.text, data_size, origin, ckpt.metadata, "checkpoint");
  } catch (const CheckpointError&) {
    if (!ckpt.metadata.count(kCrcKey)) throw;  // no checksum to judge by: the header's own error
    table_error = std::current_exception();
  }
  // Required, not optional: were a file without it accepted, one altered
  // byte in the key's name would switch the check off.
  auto stored = ckpt.metadata.find(kCrcKey);
  if (stored == ckpt.metadata.end())
    throw bad(fmt::format("no {} checksum in its metadata (not written by hpu-train, or altered)", kCrcKey));
  const std::string field = std::string("\"") + kCrcKey + "\":\"" + stored->second + "\"";
  const std::size_t at = header.text.find(field);
  if (at == std::string::npos || stored->second.size() != 8) throw bad("malformed checksum field");
  std::string zeroed = header.text;
  zeroed.replace(at + field.size() - 9, 8, "00000000");
  std::uint32_t crc = crcUpdate(crcUpdate(crcStart(), header.first8), zeroed);
  if (!table_error) {
    ckpt.tensors.reserve(entries.size());
    for (const SafetensorsTensor& e : entries) {
      TensorEntry& t = ckpt.tensors.emplace_back(TensorEntry{e.name, e.dtype, e.shape, {}, {}});
      (e.dtype == DType::kInt64 ? t.ints.resize(static_cast<std::size_t>(e.numel()))
                                : t.values.resize(static_cast<std::size_t>(e.numel())));
    }
  }
  // The tensors by where their bytes begin; those the current piece reaches.
  std::vector<std::size_t> order(ckpt.tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return entries[a].begin < entries[b].begin; });
  std::vector<std::size_t> reached;
  std::vector<unsigned char> pending(ckpt.tensors.size());
  std::string piece(static_cast<std::size_t>(std::min<std::uint64_t>(data_size, kPiece)), '\0');
  std::size_t next = 0;
  for (std::uint64_t begin = 0; begin < data_size; begin += piece.size()) {
    piece.resize(static_cast<std::size_t>(std::min<std::uint64_t>(data_size - begin, kPiece)));
    source.read(8 + header.text.size() + begin, piece);
    crc = crcUpdate(crc, piece);
    const std::uint64_t end = begin + piece.size();
    while (next < order.size() && entries[order[next]].begin < end) reached.push_back(order[next++]);
    std::erase_if(reached, [&](std::size_t i) {
      const SafetensorsTensor& e = entries[i];
      const std::uint64_t from = std::max(e.begin, begin), to = std::min(e.end, end);
      if (from < to)
        fill(ckpt.tensors[i], from - e.begin, reinterpret_cast<const unsigned char*>(piece.data()) + (from - begin),
             static_cast<std::size_t>(to - from), pending[i]);
      return e.end <= end;
    });
  }
  const std::string actual = fmt::format("{:08x}", crc);
  if (actual != stored->second)
    throw bad(fmt::format("checksum mismatch (stored {}, computed {}): the file was altered or truncated",
                          stored->second, actual));
  ckpt.metadata.erase(stored);
  if (table_error) std::rethrow_exception(table_error);
  return ckpt;
}

}  // namespace

std::map<std::string, std::string> readMetadata(const std::string& path) {
  FileSource source(path, "checkpoint ");
  const Header header = readHeader(source, path);
  std::map<std::string, std::string> metadata;
  parseSafetensorsHeader(header.text, header.dataSize(source.size()), path, metadata, "checkpoint");
  return metadata;
}

Checkpoint decodeSafetensors(const std::string& bytes, const std::string& origin) {
  StringSource source(bytes);
  return decodeFrom(source, origin);
}

Checkpoint readSafetensorsFile(const std::string& path) {
  FileSource source(path, "");
  return decodeFrom(source, path);
}

}  // namespace hpu::core::checkpoint
