#include "tokenizers/pre_tokenizer.h"

#include <algorithm>
#include <deque>

#include "tokenizers/normalizer.h"

namespace hpu::core::data::detail {
namespace {

using Piece = PreTokenizer::Piece;

struct Match {
  std::uint32_t begin, end;
  bool is_match;
};

// The matches of a Split's pattern in `text` and the runs between them, in
// order, covering it (tokenizers' Pattern::find_matches).
void findMatches(const PreTokenizerStep& step, std::string_view text, std::vector<std::uint32_t>& ends,
                 std::vector<Match>& out) {
  out.clear();
  if (step.pattern) {
    // The regexes match every character: the text is all matches.
    ends.clear();
    splitByPattern(*step.pattern, text, ends);
    std::uint32_t begin = 0;
    for (std::uint32_t end : ends) {
      out.push_back({begin, end, true});
      begin = end;
    }
    return;
  }
  std::size_t done = 0;
  if (!step.literal.empty())
    for (std::size_t hit = text.find(step.literal); hit != std::string_view::npos;
         hit = text.find(step.literal, hit + step.literal.size())) {
      if (hit > done) out.push_back({static_cast<std::uint32_t>(done), static_cast<std::uint32_t>(hit), false});
      done = hit + step.literal.size();
      out.push_back({static_cast<std::uint32_t>(hit), static_cast<std::uint32_t>(done), true});
    }
  if (done < text.size() || out.empty())
    out.push_back({static_cast<std::uint32_t>(done), static_cast<std::uint32_t>(text.size()), false});
}

// The pieces a behavior makes of matches (tokenizers' NormalizedString::split).
void applyBehavior(SplitBehavior behavior, std::vector<Match>& matches, std::vector<Piece>& pieces) {
  pieces.clear();
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Match& m : matches)
        if (!m.is_match) pieces.push_back({m.begin, m.end});
      return;
    case SplitBehavior::kIsolated:
      for (const Match& m : matches) pieces.push_back({m.begin, m.end});
      return;
    case SplitBehavior::kMergedWithPrevious:
      for (const Match& m : matches) {
        if (m.is_match && !previous_match && !pieces.empty())
          pieces.back().end = m.end;
        else
          pieces.push_back({m.begin, m.end});
        previous_match = m.is_match;
      }
      return;
    case SplitBehavior::kMergedWithNext:
      for (auto m = matches.rbegin(); m != matches.rend(); ++m) {
        if (m->is_match && !previous_match && !pieces.empty())
          pieces.back().begin = m->begin;
        else
          pieces.push_back({m->begin, m->end});
        previous_match = m->is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      return;
    case SplitBehavior::kContiguous:
      for (const Match& m : matches) {
        if (m.is_match == previous_match && !pieces.empty())
          pieces.back().end = m.end;
        else
          pieces.push_back({m.begin, m.end});
        previous_match = m.is_match;
      }
      return;
  }
}

}  // namespace

PreTokenizer::Scratch& PreTokenizer::scratch(std::size_t s) {
  thread_local std::deque<Scratch> buffers;  // a deque: growing it moves no step's buffers
  while (buffers.size() <= s) buffers.emplace_back();
  return buffers[s];
}

std::string_view PreTokenizer::cut(std::size_t s, std::string_view text, bool first, Scratch& out) const {
  const PreTokenizerStep& step = steps_[s];
  out.pieces.clear();
  const auto whole = [&](std::string_view t) {
    out.pieces.push_back({0, static_cast<std::uint32_t>(t.size())});
    return t;
  };
  switch (step.kind) {
    case PreTokenizerStep::Kind::kByteLevel:
      if (!step.add_prefix_space || text.starts_with(' ')) return whole(text);
      out.text.assign(" ").append(text);
      return whole(out.text);
    case PreTokenizerStep::Kind::kSplit: {
      thread_local std::vector<Match> matches;
      findMatches(step, text, out.ends, matches);
      if (step.invert)
        for (Match& m : matches) m.is_match = !m.is_match;
      applyBehavior(step.behavior, matches, out.pieces);
      return text;
    }
    case PreTokenizerStep::Kind::kMetaspace: {
      replaceAll(text, " ", step.replacement, out.text);
      if (!out.text.starts_with(step.replacement) &&
          (step.prepend == PreTokenizerStep::Prepend::kAlways ||
           (step.prepend == PreTokenizerStep::Prepend::kFirst && first)))
        out.text.insert(0, step.replacement);
      const std::string_view t = out.text;
      if (!step.split) return whole(t);
      std::uint32_t start = 0;
      for (std::size_t at = t.find(step.replacement, 1); at != std::string_view::npos;
           at = t.find(step.replacement, at + step.replacement.size())) {
        out.pieces.push_back({start, static_cast<std::uint32_t>(at)});
        start = static_cast<std::uint32_t>(at);
      }
      out.pieces.push_back({start, static_cast<std::uint32_t>(t.size())});
      return t;
    }
  }
  return text;
}

}  // namespace hpu::core::data::detail
