#!/usr/bin/env bash
# The GEMM micro-kernels (hpu::device::kernels::packed::microKernelOf, every
# instruction set) keep their tile of C in registers through the k loop: no
# loop of theirs that multiplies (vfmadd*, vdpbf16ps) may store a vector
# register to memory. GCC once kept the tile in memory and stored all of it
# on every k step (3.5x slower on AVX2; packed_gemm.h says why). Checks the
# disassembly of the given executable, or, with --objdump FILE, a saved one.
# Usage: register_tile_check.sh <executable> | --objdump <file>
set -euo pipefail
if [[ "$1" == "--objdump" ]]; then
  listing=$(cat "$2")
else
  listing=$(objdump -d --no-show-raw-insn -C "$1")
fi
report=$(awk '
  # Hex addresses as fixed-width strings, which then compare in address order.
  function key(hex) { return sprintf("%16s", hex) }
  # The k loop: the smallest loop (a backward branch back to its target)
  # that multiplies. Reports its vector stores to memory.
  function flush(   i, j, target, best_from, best_to, body, stores) {
    if (fn == "") return
    best_from = 0
    for (i = 1; i <= n; i++) {
      if (!match(text[i], /\tj[a-z]+ +[0-9a-f]+ </)) continue
      split(substr(text[i], RSTART), parts, /[ \t]+/)
      target = key(parts[2])
      if (target >= addr[i]) continue
      body = 0
      for (j = 1; j <= i; j++)
        if (addr[j] >= target && text[j] ~ /\tv(fmadd|dpbf16ps)/) body = 1
      if (!body) continue
      for (j = 1; j <= i && addr[j] < target; j++) {}
      if (best_from == 0 || i - j < best_to - best_from) { best_from = j; best_to = i }
    }
    if (best_from == 0) { print fn ": no multiply loop found"; return }
    stores = ""
    for (j = best_from; j <= best_to; j++)
      if (text[j] ~ /\tvmov[a-z0-9]* +%[xyz]mm[0-9]+,[^%]*\(/) stores = stores "\n    " text[j]
    if (stores != "") print fn ": stores in its multiply loop:" stores
  }
  /^[0-9a-f]+ <.*>:$/ {
    flush()
    fn = ""; n = 0
    if ($0 ~ /hpu::device::kernels::packed::microKernel(Of)?</) { fn = substr($0, index($0, "<") + 1); sub(/>:$/, "", fn) }
    next
  }
  fn != "" && /^ +[0-9a-f]+:\t/ {
    n++; addr[n] = key(substr($1, 1, length($1) - 1)); text[n] = $0
  }
  END { flush() }
' <<<"$listing")
kernels=$(grep -cE '^ *[0-9a-f]* <void hpu::device::kernels::packed::microKernel(Of)?<' <<<"$listing" || true)
if [[ "$kernels" -eq 0 ]]; then
  echo "no micro-kernel found in the disassembly"
  exit 1
fi
if [[ -n "$report" ]]; then
  echo "$report" | head -40
  exit 1
fi
echo "$kernels micro-kernels: no vector store inside a multiply loop"
