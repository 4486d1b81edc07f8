// GPT-2's byte-to-character map (bytes_to_unicode in its encoder.py, the
// ByteLevel pre-tokenizer and decoder of Hugging Face tokenizers): every
// byte gets a printable character, so a byte-level vocabulary is text.
// Bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves;
// the other 68 take U+0100, U+0101, ... in byte order. Pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace hpu::core::data::detail {

// The character byte b stands for.
char32_t byteToUnicode(std::uint8_t b);
// Its UTF-8 text (precomputed: 1 or 2 bytes).
const std::string& byteToUtf8(std::uint8_t b);
// The byte a character stands for, or nullopt if it stands for none.
std::optional<std::uint8_t> unicodeToByte(char32_t c);

}  // namespace hpu::core::data::detail
