#!/usr/bin/env bash
# Installs everything hpu-train needs to build, test and train, with apt-get.
# Idempotent and silent when all is installed. Run as root (or with sudo).
#   scripts/install-deps.sh          build + test + data sets (Fashion-MNIST, the fortunes text), and
#                                    Open MPI (HPU_COLLECTIVES=mpi; the build works without it)
#   scripts/install-deps.sh --bench  also the benchmark yardsticks (PyTorch, OpenBLAS)
#   scripts/install-deps.sh --fuzz   also clang with libFuzzer and the sanitizer runtimes (scripts/fuzz.sh)
#   scripts/install-deps.sh --interop  also the real clients that judge our files (transformers, peft,
#                                    tokenizers, torch 2.13 CPU, tensorboard, mlflow, lightning 2.4,
#                                    jsonargparse) in the virtual
#                                    environment .venv/interop,
#                                    and node with npm for the reference tokenizers
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config
  libyaml-cpp-dev libcli11-dev libeigen3-dev libspdlog-dev libfmt-dev
  libzmq3-dev cppzmq-dev libsodium-dev zlib1g-dev nlohmann-json3-dev
  libprotobuf-dev protobuf-compiler gnuplot-nox
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist fortunes
  openmpi-bin libopenmpi-dev
)
interop=false
for option in "$@"; do
  case "$option" in
    # node and npm run the reference tokenizers (tests/tokenizers/make_fixtures.sh);
    # a node that brings its own npm needs no Debian npm.
    --interop)
      interop=true
      packages+=(python3 python3-venv nodejs)
      command -v npm >/dev/null || packages+=(npm)
      ;;
    --bench) packages+=(python3-torch libopenblas0-openmp) ;;
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

# The interop environment: made once, remade when its requirements change.
if $interop; then
  root="$(cd "$(dirname "$0")/.." && pwd)"
  venv="$root/.venv/interop" requirements="$root/tests/interop/requirements.txt"
  if ! cmp -s "$requirements" "$venv/requirements.txt" 2>/dev/null; then
    echo "creating $venv (torch 2.13.0 CPU, transformers, peft, tokenizers, tensorboard, mlflow)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$venv/requirements.txt"
  fi
fi
