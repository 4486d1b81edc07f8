#include "tokenizers/normalizer.h"

#include "tokenizers/unicode_normalization.h"

namespace hpu::core::data::detail {

void replaceAll(std::string_view text, std::string_view pattern, std::string_view content, std::string& out) {
  out.clear();
  for (std::size_t at = 0;;) {
    const std::size_t hit = text.find(pattern, at);
    if (hit == std::string_view::npos) {
      out.append(text.substr(at));
      return;
    }
    out.append(text.substr(at, hit - at)).append(content);
    at = hit + pattern.size();
  }
}

void Normalizer::apply(std::string_view text, std::string& out) const {
  out.assign(text);
  std::string scratch;
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::kPrepend:
        if (!out.empty()) out.insert(0, step.content);
        continue;
      case NormalizerStep::Kind::kReplace:
        replaceAll(out, step.pattern, step.content, scratch);
        break;
      case NormalizerStep::Kind::kNfc:
        normalizeUnicode(out, NormalizationForm::kNfc, scratch);
        break;
      case NormalizerStep::Kind::kNfd:
        normalizeUnicode(out, NormalizationForm::kNfd, scratch);
        break;
    }
    out.swap(scratch);
  }
}

}  // namespace hpu::core::data::detail
