#!/usr/bin/env bash
# Sets up (apt + build) and runs every test with ctest. This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== running tests"
# Services and tests share the cores: passive OpenMP waits keep oversubscribed threads from
# spinning against each other.
export OMP_WAIT_POLICY=passive
ctest --test-dir build --output-on-failure -j 2 --timeout 900
