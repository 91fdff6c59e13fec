#!/usr/bin/env bash
# Installs splitspec's build and test dependencies from Debian 12 packages, then configures and
# builds into build/. Idempotent: a machine that has everything skips apt and rebuilds
# incrementally. Usage: scripts/setup.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev libsentencepiece-dev sentencepiece
  libopenblas-dev libcpp-httplib-dev nlohmann-json3-dev prometheus prometheus-cpp-dev
  python3-torch python3-numpy python3-sentencepiece python3-matplotlib python3-yaml)
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
cmake --build build -j "$(nproc)"
