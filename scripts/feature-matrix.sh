#!/usr/bin/env bash
# Runs the whole feature matrix (tests/train/feature_matrix_test.cc: every
# strategy x model source x tuning x precision x subcommand on a tiny
# language model, 1-4 local ranks) and writes its verdicts to
# docs/feature-matrix.md. CI runs a sample of the cells that changes with the
# commit; this runs them all (2-7 minutes on 2 cores).
#
#   scripts/feature-matrix.sh [N]     N cells (a sample drawn by the commit) instead of all
#
# Exit 1 when a cell crashed, hung or failed on a rank after start.
set -euo pipefail
cd "$(dirname "$0")/.."
cells="${1:-all}"
[[ "$cells" == all || "$cells" =~ ^[1-9][0-9]*$ ]] || { echo "feature-matrix.sh: N must be a positive number, not '$cells'" >&2; exit 2; }
scripts/build.sh train_tests hpu-train
table="$(mktemp)"
trap 'rm -f "$table"' EXIT
status=0
HPU_FEATURE_MATRIX="$cells" HPU_FEATURE_MATRIX_TABLE="$table" \
  build/train_tests --gtest_filter='FeatureMatrixTest.*' || status=$?
rows=$(( $(grep -c '^| ' "$table") - 1 ))
refused="$(grep -c '| refused: ' "$table" || true)"
{
  echo "# Feature matrix"
  echo
  echo "Every combination of strategy, model source, tuning, precision and subcommand on a tiny"
  echo "language model (2 steps, 1-4 local ranks), as \`scripts/feature-matrix.sh\` ran it on"
  echo "$(date -u +%Y-%m-%d) at commit $(git rev-parse --short HEAD). A cell runs (and, where the math is"
  echo "one device's, gives one device's weights, tokens or resumed state) or is refused before any"
  echo "rank starts, with exit 2 and the message shown. The reference for a data-parallel layout is one"
  echo "device on the same global batch; reduced precisions are compared to 5% of the model's largest"
  echo "weight (their rounding does not shrink with a small tensor). CI runs 10 cells drawn by the"
  echo "commit, \`scripts/feature-matrix.sh\` all of them."
  echo
  echo "Summary: $rows cells; $refused refused up front, $(grep -c '| FAILED' "$table" || true) failed, the"
  echo "others run as described."
  echo
  cat "$table"
} > docs/feature-matrix.md.tmp
mv docs/feature-matrix.md.tmp docs/feature-matrix.md
echo "wrote docs/feature-matrix.md"
exit "$status"
