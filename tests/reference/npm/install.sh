#!/usr/bin/env bash
# Installs npm packages for reference tests into a cache directory (never into the source
# tree), once: later runs find them there. Usage: install.sh CACHE_DIR PACKAGE...
# Exit status 77 means the npm registry cannot be reached (tests then skip, saying so).
set -euo pipefail
cache=$1
shift
mkdir -p "$cache"
missing=()
for package in "$@"; do
  [ -f "$cache/node_modules/$package/package.json" ] || missing+=("$package")
done
((${#missing[@]})) || exit 0
if ! command -v npm > /dev/null; then
  echo "npm is not installed" >&2
  exit 77
fi
# A lock keeps tests that run in parallel from installing into one directory at once.
exec 9> "$cache/.install.lock"
flock 9
if ! npm ping --fetch-timeout=15000 > /dev/null 2>&1; then
  echo "the npm registry cannot be reached" >&2
  exit 77
fi
# --ignore-scripts: no package here needs its install scripts (some would download binaries).
# Saved to the cache's package.json, so a later install for another test does not prune them.
npm install --prefix "$cache" --no-audit --no-fund --ignore-scripts "${missing[@]}" >&2
