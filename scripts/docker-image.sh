#!/usr/bin/env bash
# docker-image.sh BUILD_DIR [TAG] - build the ringkv image from BUILD_DIR's
# binaries (default tag ringkv:local).
#
# No registry is reachable, so there is no base image: the image is
# FROM scratch (deploy/Dockerfile) and holds /usr/bin/ringkvd,
# /usr/bin/ringkv, /usr/bin/redis-cli (when installed) and exactly the shared libraries `ldd` lists for them
# (with the dynamic loader), at the paths ldd gives. glibc 2.36 resolves
# names (Docker's service names) with no NSS modules present. An ASan build
# works too: its sanitizer runtimes are among what ldd lists.
set -euo pipefail

build=${1:?usage: $0 BUILD_DIR [TAG]}
tag=${2:-ringkv:local}
root=$(cd "$(dirname "$0")/.." && pwd)
bins=("$build/bin/ringkvd" "$build/bin/ringkv")
for b in "${bins[@]}"; do
    [ -x "$b" ] || { echo "$0: $b not found: build first (make build)" >&2; exit 1; }
done
# redis-cli too (Debian's redis-tools, which install-deps.sh installs), so
# that `docker exec <node> redis-cli` works in a container
rcli=$(command -v redis-cli || true)
[ -z "$rcli" ] || bins+=("$rcli")
command -v docker >/dev/null || { echo "$0: docker not found" >&2; exit 1; }

stage=$(mktemp -d /tmp/ringkv-image.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/rootfs/usr/bin" "$stage/rootfs/tmp" \
    "$stage/rootfs/var/lib/ringkv" "$stage/rootfs/etc"
chmod 1777 "$stage/rootfs/tmp"
cp "${bins[@]}" "$stage/rootfs/usr/bin/"
# every library any of the binaries loads, and the loader (the line
# without "=>"; ldd heads each binary's list with "path:"); linux-vdso has
# no file
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }
                        $1 ~ /^\// && $1 !~ /:$/ { print $1 }' | sort -u |
    while read -r lib; do
        mkdir -p "$stage/rootfs$(dirname "$lib")"
        cp -L "$lib" "$stage/rootfs$lib"
    done
# the host names of the compose network come from Docker's DNS server
echo "hosts: files dns" > "$stage/rootfs/etc/nsswitch.conf"
cp "$root/deploy/Dockerfile" "$stage/Dockerfile"
# the classic builder: BuildKit's buildx plugin may not be installed
if ! out=$(DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$stage" 2>&1); then
    echo "$out" >&2
    exit 1
fi
echo "$tag: $(du -sh "$stage/rootfs" | cut -f1), ${bins[*]##*/} with $(find "$stage/rootfs" -name '*.so*' | wc -l) libraries"
