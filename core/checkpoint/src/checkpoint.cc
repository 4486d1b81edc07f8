#include "hpu/core/checkpoint/checkpoint.h"

#include <spdlog/fmt/fmt.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hpu/core/base/errors.h"
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

void appendValues(std::string& out, const TensorEntry& t) {
  switch (t.dtype) {
    case DType::kFloat32: out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4); break;
    case DType::kBFloat16:
    case DType::kFloat16:
      for (float v : t.values) {
        const std::uint16_t bits =
            t.dtype == DType::kBFloat16 ? device::toBFloat16Bits(v) : device::toFloat16Bits(v);
        out.push_back(static_cast<char>(bits & 0xff));
        out.push_back(static_cast<char>(bits >> 8));
      }
      break;
    case DType::kInt64: out.append(reinterpret_cast<const char*>(t.ints.data()), t.ints.size() * 8); break;
    default: break;
  }
}

std::uint32_t crcOf(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(bytes.size() - done, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), chunk);
    done += chunk;
  }
  return static_cast<std::uint32_t>(crc);
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
  json header = json::object();
  std::string data;
  for (const TensorEntry& t : ckpt.tensors) {
    const char* dt = safetensorsDType(t.dtype);
    if (dt == nullptr) throw CheckpointError("cannot store a " + std::string(device::dtypeName(t.dtype)) + " tensor");
    const std::size_t begin = data.size();
    appendValues(data, t);
    header[t.name] = {{"dtype", dt}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  json meta = json::object();
  for (const auto& [k, v] : ckpt.metadata) meta[k] = v;
  meta[kCrcKey] = "00000000";
  header["__metadata__"] = meta;
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');  // align data as the format recommends
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += text;
  out += data;
  const std::string placeholder = std::string("\"") + kCrcKey + "\":\"00000000\"";
  const std::size_t at = out.find(placeholder);
  const std::string crc = fmt::format("{:08x}", crcOf(out));
  out.replace(at + placeholder.size() - 9, 8, crc);
  return out;
}

namespace {

CheckpointError invalid(const std::string& origin, const std::string& why) {
  return CheckpointError(fmt::format("{} is not a valid checkpoint: {}", origin, why));
}

}  // namespace

std::map<std::string, std::string> readMetadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(fmt::format("cannot read checkpoint {}: {}", path, std::strerror(errno)));
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  std::string first8(8, '\0');
  in.read(first8.data(), 8);
  first8.resize(static_cast<std::size_t>(in.gcount()));
  std::string text(safetensorsHeaderLength(first8, size, path, "checkpoint"), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (static_cast<std::size_t>(in.gcount()) != text.size()) throw invalid(path, "its header could not be read");
  std::map<std::string, std::string> metadata;
  parseSafetensorsHeader(text, size - 8 - text.size(), path, metadata, "checkpoint");
  return metadata;
}

Checkpoint decodeSafetensors(const std::string& bytes, const std::string& origin) {
  auto bad = [&](const std::string& why) { return invalid(origin, why); };
  const std::uint64_t n = safetensorsHeaderLength(std::string_view(bytes).substr(0, 8), bytes.size(), origin, "checkpoint");
  Checkpoint ckpt;
  const std::size_t data_begin = 8 + n;
  // A tensor table that does not fit the bytes is reported as the checksum's
  // failure when the checksum fails too (a truncated or altered file).
  std::vector<SafetensorsTensor> entries;
  std::exception_ptr table_error;
  try {
    entries = parseSafetensorsHeader(std::string_view(bytes).substr(8, n), bytes.size() - data_begin, origin,
                                     ckpt.metadata, "checkpoint");
  } catch (const CheckpointError&) {
    if (!ckpt.metadata.count(kCrcKey)) throw;  // no checksum to judge by: the header's own error
    table_error = std::current_exception();
  }
  // Required, not optional: were a file without it accepted, one altered
  // byte in the key's name would switch the check off.
  auto crc = ckpt.metadata.find(kCrcKey);
  if (crc == ckpt.metadata.end())
    throw bad(fmt::format("no {} checksum in its metadata (not written by hpu-train, or altered)", kCrcKey));
  {
    std::string copy = bytes;
    const std::string field = std::string("\"") + kCrcKey + "\":\"" + crc->second + "\"";
    const std::size_t at = copy.find(field);
    if (at == std::string::npos || crc->second.size() != 8) throw bad("malformed checksum field");
    copy.replace(at + field.size() - 9, 8, "00000000");
    const std::string actual = fmt::format("{:08x}", crcOf(copy));
    if (actual != crc->second)
      throw bad(fmt::format("checksum mismatch (stored {}, computed {}): the file was altered or truncated",
                            crc->second, actual));
    ckpt.metadata.erase(crc);
  }
  if (table_error) std::rethrow_exception(table_error);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data()) + data_begin;
  for (const SafetensorsTensor& e : entries) {
    TensorEntry t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    const auto numel = static_cast<std::size_t>(e.numel());
    if (t.dtype == DType::kInt64) {
      t.ints.resize(numel);
      if (numel != 0) std::memcpy(t.ints.data(), data + e.begin, numel * 8);  // an empty vector's data() may be null
    } else {
      t.values.resize(numel);
      widenToFloat(t.dtype, data + e.begin, t.values);
    }
    ckpt.tensors.push_back(std::move(t));
  }
  return ckpt;
}

}  // namespace hpu::core::checkpoint
