// Grammar of a SLURM host list (the subset srun produces):
//   list   := host (',' host)*
//   host   := (text | '[' ranges ']')+      text: no ',', '[' or ']'
//   ranges := range (',' range)*
//   range  := digits | digits '-' digits    (zero padding is kept)
// The whole list is validated; the first host takes the first value of every
// bracket group of the first host.
#include "hpu/comm/slurm_nodelist.h"

#include <cctype>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/errors.h"

namespace hpu::comm {
namespace {

class NodeListParser {
 public:
  NodeListParser(std::string_view text, std::string_view variable) : text_(text), variable_(variable) {}

  std::string firstHost() {
    if (text_.empty()) fail("is empty");
    std::string first;
    bool inFirstHost = true;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ',') {
        if (hostLength_ == 0) fail(fmt::format("has an empty host name at offset {}", pos_));
        inFirstHost = false;
        hostLength_ = 0;
        ++pos_;
      } else if (c == '[') {
        ++pos_;
        std::string value = ranges();
        if (inFirstHost) first += value;
        ++hostLength_;
      } else if (c == ']') {
        fail(fmt::format("has ']' without '[' at offset {}", pos_));
      } else {
        if (inFirstHost) first += c;
        ++hostLength_;
        ++pos_;
      }
    }
    if (hostLength_ == 0) fail("ends with ','");
    return first;
  }

 private:
  // Parses "ranges ']'" and returns the first value as written.
  std::string ranges() {
    std::string first;
    bool firstRange = true;
    for (;;) {
      std::string low = digits();
      if (firstRange) first = low;
      firstRange = false;
      if (peek() == '-') {
        ++pos_;
        std::string high = digits();
        if (std::stoull(high) < std::stoull(low)) fail(fmt::format("has a descending range {}-{}", low, high));
      }
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return first;
      }
      fail(pos_ < text_.size() ? fmt::format("has '{}' inside brackets at offset {}", text_[pos_], pos_)
                               : std::string("has an unclosed '['"));
    }
  }

  std::string digits() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ == start || pos_ - start > 18) {
      fail(pos_ < text_.size() ? fmt::format("needs a number at offset {}", start) : std::string("has an unclosed '['"));
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  [[noreturn]] void fail(const std::string& what) const {
    throw EnvError(fmt::format("{}='{}' {}; expected a host list like node[01-04,07],login1", variable_, text_, what));
  }

  std::string_view text_;
  std::string_view variable_;
  std::size_t pos_ = 0;
  std::size_t hostLength_ = 0;
};

}  // namespace

std::string firstHostOfNodeList(std::string_view nodeList, std::string_view variable) {
  return NodeListParser(nodeList, variable).firstHost();
}

}  // namespace hpu::comm
