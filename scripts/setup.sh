#!/usr/bin/env bash
# Installs splitspec's build and test dependencies from Debian 12 packages (clang for the fuzz
# targets of scripts/fuzz.sh), then configures and builds into build/. Idempotent: a machine
# that has everything skips apt and rebuilds incrementally.
# Usage: scripts/setup.sh [extra cmake -D options]
# SPLITSPEC_BUILD_TARGETS="a b ..." builds only those targets (scripts/demo.sh: the binaries it
# runs); unset, everything is built, tests included.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev libsentencepiece-dev sentencepiece
  libopenblas-dev libcpp-httplib-dev nlohmann-json3-dev libicu-dev prometheus prometheus-cpp-dev
  python3-torch python3-numpy python3-sentencepiece python3-matplotlib python3-yaml
  clang-14 libclang-rt-14-dev libomp-14-dev
  openssl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing ${#missing[@]} Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

echo "== configuring and building (build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" > build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
targets=()
read -r -a targets <<< "${SPLITSPEC_BUILD_TARGETS:-}"
cmake --build build -j "$(nproc)" ${targets[@]:+--target "${targets[@]}"}
