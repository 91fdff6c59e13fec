#!/usr/bin/env bash
# Builds splitspec's container image (deploy/Containerfile) with buildah, without a container
# registry: the Debian 12 base image comes from debootstrap, from the Debian archive that apt
# already uses on this machine (/etc/apt/sources.list*), imported into buildah.
#
#   scripts/build-image.sh [IMAGE]      (default IMAGE: localhost/splitspec:latest; run as root)
#
# Idempotent: the base root filesystem is kept as a tarball under SPLITSPEC_IMAGE_CACHE (default
# /var/cache/splitspec-image) and imported once; buildah's layer cache skips unchanged steps, and
# the compile step keeps its ccache in a build cache mount, so a rebuild recompiles only what
# changed. The compile keeps both cores busy, so this script holds the build lock
# (SPLITSPEC_BUILD_LOCK, default /tmp/splitspec-build.lock) while buildah builds: do not wrap
# it in another flock on the same file.
# SPLITSPEC_DEBIAN_MIRROR overrides the archive found in apt's sources.
set -euo pipefail
cd "$(dirname "$0")/.."

image="${1:-localhost/splitspec:latest}"
base_image=localhost/splitspec-base:bookworm
cache="${SPLITSPEC_IMAGE_CACHE:-/var/cache/splitspec-image}"
lock="${SPLITSPEC_BUILD_LOCK:-/tmp/splitspec-build.lock}"
step() { echo "== $(date -u +%H:%M:%S) $*"; }

[ "$(id -u)" -eq 0 ] || { echo "build-image.sh: run as root (debootstrap and buildah need it)" >&2; exit 1; }

install_tools() {
  local missing=()
  command -v buildah > /dev/null || missing+=(buildah)
  command -v debootstrap > /dev/null || missing+=(debootstrap)
  ((${#missing[@]})) || return 0
  step "installing ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Prints "URI SUITE" for every binary (deb) source apt reads, one-line and deb822 formats alike.
apt_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } print $i, $(i + 1) }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = "" }
      { types = uris = suites = ""
        n = split($0, lines, "\n")
        for (j = 1; j <= n; j++) {
          if (lines[j] ~ /^Types:/) types = lines[j]
          if (lines[j] ~ /^URIs:/) { uris = lines[j]; sub(/^URIs:[ \t]*/, "", uris) }
          if (lines[j] ~ /^Suites:/) { suites = lines[j]; sub(/^Suites:[ \t]*/, "", suites) }
        }
        if (types ~ /[ \t]deb([ \t]|$)/) {
          nu = split(uris, u, /[ \t]+/); ns = split(suites, s, /[ \t]+/)
          for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) print u[a], s[b]
        } }' "$f"
  done
}

# The archive serving a suite, from apt's sources (the first one listed).
archive_for() { apt_sources | awk -v suite="$1" '$2 == suite { print $1; exit }'; }

mirror="${SPLITSPEC_DEBIAN_MIRROR:-$(archive_for bookworm)}"
security="$(archive_for bookworm-security)"
[ -n "$mirror" ] || { echo "build-image.sh: no bookworm archive in /etc/apt/sources.list*; set SPLITSPEC_DEBIAN_MIRROR" >&2; exit 1; }
key=$(printf '%s %s' "$mirror" "$security" | sha256sum | cut -c1-12)
tarball="$cache/debian-bookworm-minbase-$key.tar"

# A minimal Debian 12 root filesystem whose apt reads the same archive, without documentation,
# man pages, translations or package lists (none of which a service image needs).
make_base_tarball() {
  [ -s "$tarball" ] && { step "base tarball cached: $tarball"; return 0; }
  install_tools
  root=$(mktemp -d /var/tmp/splitspec-rootfs.XXXXXX)
  trap 'rm -rf "$root" "$root.log" "$tarball.tmp"' EXIT
  step "debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1 ||
    { tail -20 "$root.log"; exit 1; }
  {
    echo "deb $mirror bookworm main"
    echo "deb $mirror bookworm-updates main"
    [ -z "$security" ] || echo "deb $security bookworm-security main"
  } > "$root/etc/apt/sources.list"
  cat > "$root/etc/dpkg/dpkg.cfg.d/splitspec-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
  cat > "$root/etc/apt/apt.conf.d/splitspec-slim" <<'EOF'
APT::Install-Recommends "false";
Acquire::Languages "none";
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$root"/usr/share/{man,info,locale,lintian}/* "$root"/var/lib/apt/lists/* \
    "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log
  mkdir -p "$cache"
  tar --numeric-owner --xattrs -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$root" "$root.log"
  step "base tarball: $tarball ($(du -h "$tarball" | cut -f1))"
}

# The tarball as a one-layer image; re-imported only when the tarball changed.
import_base() {
  local digest current container
  digest=$(sha256sum "$tarball" | cut -d' ' -f1)
  current=$(buildah inspect --type image --format '{{index .OCIv1.Config.Labels "io.splitspec.base-tarball"}}' \
    "$base_image" 2> /dev/null || true)
  [ "$current" = "$digest" ] && { step "base image $base_image up to date"; return 0; }
  step "importing the base tarball as $base_image"
  container=$(buildah from scratch)
  buildah add "$container" "$tarball" / > /dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /bin/bash --label "io.splitspec.base-tarball=$digest" "$container"
  buildah commit --rm --quiet "$container" "$base_image" > /dev/null
}

build_image() {
  local revision start
  revision=$(git rev-parse HEAD 2> /dev/null || echo unknown)
  step "waiting for the build lock $lock"
  exec 9> "$lock"
  flock 9
  start=$(date +%s)
  step "building $image (deploy/Containerfile)"
  # chroot isolation: this machine has no OCI runtime that can start containers; the host
  # network reaches the Debian archive for the apt steps.
  buildah bud --isolation chroot --network host --layers -f deploy/Containerfile \
    --build-arg "BASE=$base_image" --label "org.opencontainers.image.revision=$revision" -t "$image" .
  step "built $image in $(($(date +%s) - start)) s"
  flock -u 9
  exec 9>&-
}

install_tools
make_base_tarball
import_base
build_image
buildah images --format '{{.Name}}:{{.Tag}} {{.ID}} size {{.Size}}' "$image" | sed 's/^/== image /'
# What a registry would store and a node pull: the layers compressed, as `buildah push` writes them.
layout=$(mktemp -d /var/tmp/splitspec-oci.XXXXXX)
buildah push --quiet "$image" "oci:$layout" > /dev/null
echo "== compressed layers (a registry's copy): $(du -sh "$layout" | cut -f1)"
rm -rf "$layout"
