#!/usr/bin/env bash
# Instruction data from Debian's fortunes: each question-and-answer riddle of
# /usr/share/games/fortunes/riddles as a JSON line
#   {"prompt": "Q: <question>\nA:", "completion": " <answer>"}
# Usage: scripts/riddles-to-jsonl.sh OUT.jsonl  (written atomically)
set -euo pipefail
out="${1:?usage: riddles-to-jsonl.sh OUT.jsonl}"
src=/usr/share/games/fortunes/riddles
[[ -r "$src" ]] || { echo "riddles-to-jsonl.sh: $src is missing (apt-get install fortunes)" >&2; exit 2; }
tmp="$(mktemp "$out.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
awk '
  function esc(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/\t/, " ", s); return s }
  function flush() {
    if (q != "" && a != "") printf "{\"prompt\": \"Q: %s\\nA:\", \"completion\": \" %s\"}\n", esc(q), esc(a)
    q = ""; a = ""; in_a = in_q = 0
  }
  /^%$/ { flush(); next }
  /^Q:/ { sub(/^Q:[ \t]*/, ""); q = $0; in_q = 1; in_a = 0; next }
  /^A:/ { sub(/^A:[ \t]*/, ""); a = $0; in_a = 1; in_q = 0; next }
  /^[ \t]/ { sub(/^[ \t]+/, ""); if (in_q) q = q " " $0; else if (in_a) a = a " " $0; next }
  END { flush() }
' "$src" > "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "wrote $(wc -l < "$out") riddles to $out"
