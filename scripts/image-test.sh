#!/usr/bin/env bash
# Checks the container image built by scripts/build-image.sh without starting a container (no
# OCI runtime can start one on these machines): the image's root filesystem is mounted with
# `buildah mount`, made read-only (the manifests set readOnlyRootFilesystem), and its binaries
# run from it with `chroot --userspec` as the image's non-root user.
#   1. every binary in /opt/splitspec/bin prints its usage with --help and exits 0, so each
#      finds all its shared libraries in the image;
#   2. the cpu overlay's pods (deploy/k8s) start from the image with their manifests' command,
#      args and env (two verifier replicas, one per drafter pool, the router; only host names and
#      ports rewritten to loopback), answer every gRPC probe the manifests name and serve their
#      metrics, and one generation through the router equals the bundled target model's own
#      greedy output (tests/deploy/k8s_manifests_test.py image).
#
#   scripts/image-test.sh [IMAGE] [BIN_DIR]     (as root)
#
# IMAGE: default localhost/splitspec:latest. BIN_DIR (default build/bin) holds grpc_probe and the
# splitspec CLI, which act from the host as the kubelet and a client would:
#   cmake --build build --target grpc_probe splitspec
# Exits 77 (skip) when kubectl with kustomize >= v4 is missing (the manifests cannot be rendered).
set -euo pipefail
cd "$(dirname "$0")/.."

image="${1:-localhost/splitspec:latest}"
bin_dir="${2:-build/bin}"
kubectl="${KUBECTL:-kubectl}"
step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "run as root (buildah mount and chroot need it)"
command -v buildah > /dev/null || fail "buildah is not installed (scripts/build-image.sh installs it)"
buildah inspect --type image "$image" > /dev/null 2>&1 || fail "no image $image: build it with scripts/build-image.sh"
for tool in grpc_probe splitspec; do
  [ -x "$bin_dir/$tool" ] || fail "$bin_dir/$tool is missing: cmake --build build --target grpc_probe splitspec"
done
bin_dir=$(cd "$bin_dir" && pwd)

container=""
root=""
# Kills what runs inside our chroot (only this test's processes have its root directory), then
# unmounts everything under it and removes the working container.
cleanup() {
  local rc=$? pids=() p
  if [ -n "$root" ]; then
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=()
      for p in /proc/[0-9]*; do
        [ "$(readlink "$p/root" 2> /dev/null)" = "$root" ] && pids+=("${p#/proc/}")
      done
      ((${#pids[@]})) || break
      kill -KILL "${pids[@]}" 2> /dev/null || true
      sleep 0.2
    done
    umount -R "$root" 2> /dev/null || umount -R -l "$root" 2> /dev/null || true
    rmdir "$root" 2> /dev/null || true
  fi
  if [ -n "$container" ]; then
    buildah umount "$container" > /dev/null 2>&1 || true
    buildah rm "$container" > /dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

user=$(buildah inspect --type image --format '{{.OCIv1.Config.User}}' "$image")
[[ "$user" =~ ^[1-9][0-9]*:[0-9]+$ ]] || fail "the image's user is '$user', not a numeric non-root UID:GID"
size=$(buildah images --format '{{.Size}}' "$image" | head -1)
step "image $image: $size, user $user"

container=$(buildah from --pull-never --quiet "$image")
layers=$(buildah mount "$container")
root=$(mktemp -d /tmp/splitspec-image-root.XXXXXX)
mount --bind "$layers" "$root"
mount -o remount,bind,ro "$root"
mount --make-rprivate "$root"
# What a container runtime gives every container, mounted over the image's directories. The
# services run without them, but read the CPU count from /sys/devices/system/cpu/online or
# /proc/stat (glibc, for the thread pools) and gRPC the listen backlog from /proc/sys/net; they
# open nothing under /dev (randomness comes from getrandom), which gets the runtime's usual nodes.
mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys"
mount -t tmpfs -o mode=755,size=64k tmpfs "$root/dev"
for node in null zero full random urandom; do
  touch "$root/dev/$node"
  mount --bind "/dev/$node" "$root/dev/$node"
done
step "root filesystem mounted read-only at $root (with /proc, /sys and /dev/{null,zero,full,random,urandom})"

in_image() { chroot --userspec="$user" "$root" "$@"; }

step "1. --help of every binary, as $user"
binaries=0
for path in "$root"/opt/splitspec/bin/*; do
  binary="/opt/splitspec/bin/$(basename "$path")"
  out=$(in_image "$binary" --help 2>&1) || fail "$binary --help exited $?: $out"
  grep -q "^usage: $(basename "$binary")" <<< "$out" || fail "$binary --help printed no usage: $out"
  step "   $binary --help: exit 0, $(wc -l <<< "$out") lines"
  binaries=$((binaries + 1))
done
((binaries == 3)) || fail "expected 3 binaries in /opt/splitspec/bin, found $binaries"

step "2. the cpu overlay's pods from the image, as $user"
set +e
/usr/bin/python3 tests/deploy/k8s_manifests_test.py image "$PWD" "$kubectl" "$bin_dir" \
  "$bin_dir/grpc_probe" "$root" "$user"
rc=$?
set -e
((rc != 77)) || exit 77
((rc == 0)) || fail "the manifests' pods did not run from the image (exit $rc)"

step "summary: image $image ($size, user $user): $binaries binaries answer --help; verifier x2," \
  "drafter-model, drafter-ngram and router started from the image as in the manifests, answered" \
  "their gRPC probes and metrics, and served a generation equal to target-only greedy"
echo "PASS"
