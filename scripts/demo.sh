#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install dependencies, build the four binaries it
# runs (scripts/test.sh builds the tests), start the verifier, the drafters and the router on
# loopback with the bundled default model pair, and generate from a sample prompt. Extra
# arguments go to scripts/run-local.sh (e.g. --policy smartspec, --prompt "...", or no --demo to
# keep serving: scripts/run-local.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
SPLITSPEC_BUILD_TARGETS="splitspec splitspec-verifier splitspec-drafter splitspec-router" scripts/setup.sh
export OMP_WAIT_POLICY=passive
exec scripts/run-local.sh --demo "$@"
