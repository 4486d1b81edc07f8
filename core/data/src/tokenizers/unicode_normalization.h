// Unicode's canonical normalization forms (UAX #15) of the NFC and NFD
// normalizers: full canonical decomposition (Hangul syllables by their
// algorithm), canonical ordering of combining marks, and for NFC canonical
// composition of primary composites. Tables of Python's unicodedata
// (unicode_tables.cc). Pure functions; the tables are built once, thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace hpu::core::data::detail {

enum class NormalizationForm { kNfc, kNfd };

// `text` in `form`, into `out` (REQUIRES: `text` is valid UTF-8; out does not
// alias it).
void normalizeUnicode(std::string_view text, NormalizationForm form, std::string& out);

}  // namespace hpu::core::data::detail
