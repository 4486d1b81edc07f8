// A test and benchmark tool (not installed): runs a tokenizer over the
// documents of a JSON file (a list of strings) and prints what it gives.
//   tokenize_tool TOKENIZER DOCS.json [--special]
//       [{"ids": [...], "decoded": "..."}, ...] per document (encode, or
//       encodeWithSpecialTokens with --special; decoded = decode(ids))
//   tokenize_tool TOKENIZER DOCS.json --serve
//       for each line read from stdin, encodes every document and prints
//       "<seconds> <tokens>" (for bench/tokenizers/, interleaved with the
//       reference)
//   tokenize_tool TOKENIZER --save DIR
// TOKENIZER: byte, char:CORPUS (the characters of file CORPUS), or a path
// loadTokenizer reads.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/data/tokenizer.h"

using hpu::core::data::Tokenizer;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: tokenize_tool TOKENIZER DOCS.json [--special|--serve] | TOKENIZER --save DIR\n";
    return 2;
  }
  try {
    const std::string which = argv[1], arg = argv[2];
    std::unique_ptr<Tokenizer> tokenizer;
    if (which == "byte")
      tokenizer = hpu::core::data::makeByteTokenizer();
    else if (which.starts_with("char:"))
      tokenizer = hpu::core::data::makeCharTokenizer(hpu::core::readFile(which.substr(5)), which.substr(5));
    else
      tokenizer = hpu::core::data::loadTokenizer(which);
    if (arg == "--save") {
      tokenizer->save(argv[3]);
      return 0;
    }
    const auto docs = nlohmann::json::parse(hpu::core::readFile(arg)).get<std::vector<std::string>>();
    const std::string mode = argc > 3 ? argv[3] : "";
    if (mode == "--serve") {
      for (std::string line; std::getline(std::cin, line);) {
        const auto start = std::chrono::steady_clock::now();
        std::size_t tokens = 0;
        for (const std::string& doc : docs) tokens += tokenizer->encode(doc, "doc").size();
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        std::cout << took.count() << " " << tokens << std::endl;
      }
      return 0;
    }
    nlohmann::json out = nlohmann::json::array();
    for (const std::string& doc : docs) {
      const auto ids = mode == "--special" ? tokenizer->encodeWithSpecialTokens(doc, "doc") : tokenizer->encode(doc, "doc");
      out.push_back({{"ids", ids}, {"decoded", tokenizer->decode(ids)}});
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "tokenize_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
