#!/usr/bin/env bash
# Installs everything hpu-train needs to build, test and train, with apt-get.
# Idempotent and silent when all is installed. Run as root (or with sudo).
#   scripts/install-deps.sh          build + test + data sets (Fashion-MNIST, the fortunes text), and
#                                    Open MPI (HPU_COLLECTIVES=mpi; the build works without it)
#   scripts/install-deps.sh --bench  also the benchmarks' yardstick: PyTorch 2.13.0 (CPU build) and numpy
#                                    from PyPI in the virtual environment .venv/bench
#   scripts/install-deps.sh --fuzz   also clang with libFuzzer and the sanitizer runtimes (scripts/fuzz.sh)
#   scripts/install-deps.sh --interop  also the real clients that judge our files (transformers, peft,
#                                    tokenizers, torch 2.13 CPU, tensorboard, mlflow, lightning 2.4,
#                                    jsonargparse, torch-tb-profiler) in the virtual
#                                    environment .venv/interop,
#                                    node with npm for the reference tokenizers, and chromium
#                                    (headless: tests/interop/tb_profiler_browser.sh)
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config
  libyaml-cpp-dev libcli11-dev libeigen3-dev libspdlog-dev libfmt-dev
  libzmq3-dev cppzmq-dev libsodium-dev zlib1g-dev nlohmann-json3-dev
  libprotobuf-dev protobuf-compiler gnuplot-nox
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist fortunes
  openmpi-bin libopenmpi-dev
  libcurl4-openssl-dev
)
interop=false bench=false
for option in "$@"; do
  case "$option" in
    # node and npm run the reference tokenizers (tests/tokenizers/make_fixtures.sh);
    # a node that brings its own npm needs no Debian npm.
    --interop)
      interop=true
      packages+=(python3 python3-venv nodejs chromium)
      command -v npm >/dev/null || packages+=(npm)
      ;;
    --bench)
      bench=true
      packages+=(python3 python3-venv)
      ;;
    # clang's OpenMP runtime: the device kernels use OpenMP.
    --fuzz) packages+=(clang libclang-rt-dev libomp-dev) ;;
    *) echo "install-deps.sh: unknown option '$option' (--bench, --fuzz, --interop)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done

if [[ ${#missing[@]} -gt 0 ]]; then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# A virtual environment at .venv/NAME with the packages REQUIREMENTS pins: made once,
# remade when the requirements change.
make_venv() {
  local root venv requirements
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.venv/$1" requirements="$root/$2"
  if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
    echo "creating $venv from $2"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$venv/requirements.txt"
  fi
}
if $interop; then make_venv interop tests/interop/requirements.txt; fi
if $bench; then make_venv bench bench/requirements.txt; fi
