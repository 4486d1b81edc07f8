#include "tokenizers/decoder.h"

#include <optional>

#include "tokenizers/byte_level.h"
#include "tokenizers/normalizer.h"
#include "tokenizers/utf8.h"

namespace hpu::core::data::detail {
namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// The byte of a <0xNN> token.
std::optional<std::uint8_t> fallbackByte(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return std::nullopt;
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(token[3]), lo = hex(token[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<std::uint8_t>(hi * 16 + lo);
}

std::vector<std::string> byteLevel(const std::vector<std::string>& tokens) {
  std::string bytes;
  for (const std::string& token : tokens) {
    const std::size_t before = bytes.size();
    bool mapped = true;
    for (std::size_t at = 0; at < token.size() && mapped;) {
      const auto cp = decodeAt(token, at);
      const auto byte = cp ? unicodeToByte(cp->value) : std::nullopt;
      if (byte)
        bytes += static_cast<char>(*byte), at += cp->length;
      else
        mapped = false;
    }
    if (!mapped) bytes.resize(before), bytes += token;
  }
  return {utf8Lossy(bytes)};
}

std::vector<std::string> byteFallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string bytes;
  std::size_t count = 0;
  const auto flush = [&] {
    if (count == 0) return;
    if (utf8Lossy(bytes) == bytes) {
      out.push_back(bytes);
    } else {
      for (std::size_t i = 0; i < count; ++i) out.emplace_back(kReplacementChar);
    }
    bytes.clear();
    count = 0;
  };
  for (std::string& token : tokens) {
    if (const auto byte = fallbackByte(token)) {
      bytes += static_cast<char>(*byte);
      ++count;
    } else {
      flush();
      out.push_back(std::move(token));
    }
  }
  flush();
  return out;
}

// Up to `n` leading copies of `c` (a character's UTF-8) from `token`, and `m` trailing.
std::string strip(const std::string& token, std::string_view c, std::size_t n, std::size_t m) {
  std::size_t begin = 0, end = token.size();
  for (std::size_t i = 0; i < n && token.compare(begin, c.size(), c) == 0 && begin < end; ++i) begin += c.size();
  for (std::size_t i = 0; i < m && end >= begin + c.size() && token.compare(end - c.size(), c.size(), c) == 0; ++i)
    end -= c.size();
  return token.substr(begin, end - begin);
}

}  // namespace

std::string utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t at = 0; at < bytes.size();) {
    if (const auto cp = decodeAt(bytes, at)) {
      out.append(bytes.substr(at, cp->length));
      at += cp->length;
      continue;
    }
    // The maximal subpart of a valid sequence: the lead byte and the
    // continuation bytes that still fit a well-formed sequence.
    const auto b = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
    const unsigned char lead = b(at);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) n = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) n = 3, lo = lead == 0xE0 ? 0xA0 : 0x80, hi = lead == 0xED ? 0x9F : 0xBF;
    else if (lead >= 0xF0 && lead <= 0xF4) n = 4, lo = lead == 0xF0 ? 0x90 : 0x80, hi = lead == 0xF4 ? 0x8F : 0xBF;
    std::size_t length = 1;
    if (n > 0 && at + 1 < bytes.size() && b(at + 1) >= lo && b(at + 1) <= hi) {
      length = 2;
      while (length < n && at + length < bytes.size() && (b(at + length) & 0xC0) == 0x80) ++length;
    }
    out.append(kReplacementChar);
    at += length;
  }
  return out;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  std::string scratch;
  for (const DecoderStep& step : steps_) {
    switch (step.kind) {
      case DecoderStep::Kind::kByteLevel:
        tokens = byteLevel(tokens);
        break;
      case DecoderStep::Kind::kMetaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          // As the crate: the first token loses every replacement, not only a leading one.
          replaceAll(tokens[i], step.pattern, i == 0 && step.prepend ? "" : " ", scratch);
          tokens[i].swap(scratch);
        }
        break;
      case DecoderStep::Kind::kReplace:
        for (std::string& token : tokens) {
          replaceAll(token, step.pattern, step.content, scratch);
          token.swap(scratch);
        }
        break;
      case DecoderStep::Kind::kByteFallback:
        tokens = byteFallback(std::move(tokens));
        break;
      case DecoderStep::Kind::kFuse: {
        std::string fused;
        for (const std::string& token : tokens) fused += token;
        tokens.assign(1, std::move(fused));
        break;
      }
      case DecoderStep::Kind::kStrip:
        for (std::string& token : tokens) token = strip(token, step.content, step.start, step.stop);
        break;
    }
  }
  std::string text;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (joined_ && i > 0) text += ' ';
    text += tokens[i];
  }
  return text;
}

}  // namespace hpu::core::data::detail
