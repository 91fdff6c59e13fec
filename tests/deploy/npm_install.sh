#!/usr/bin/env bash
# Installs the schema packages for the manifest validation into CACHE_DIR (never into the
# source tree), once. All packages in one npm call: npm prunes what it was not asked for.
# Usage: npm_install.sh CACHE_DIR PACKAGE@VERSION...; exit 77 when the npm registry is unreachable.
set -euo pipefail
cache=$1
shift
mkdir -p "$cache"
stamp="$cache/.installed"
[ "$(cat "$stamp" 2> /dev/null)" = "$*" ] && exit 0
command -v npm > /dev/null || { echo "npm is not installed" >&2; exit 77; }
exec 9> "$cache/.install.lock"
flock 9
[ "$(cat "$stamp" 2> /dev/null)" = "$*" ] && exit 0
if ! npm ping --fetch-timeout=15000 > /dev/null 2>&1; then
  echo "the npm registry cannot be reached" >&2
  exit 77
fi
# --ignore-scripts: these packages are schemas and code, no install step needed.
npm install --prefix "$cache" --no-audit --no-fund --no-save --ignore-scripts --loglevel=error "$@" >&2
echo "$*" > "$stamp"
