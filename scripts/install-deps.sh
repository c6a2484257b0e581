#!/usr/bin/env bash
# Installs what ringkv needs on Debian 12 with apt-get; does nothing when it is
# all there already. Run as root (or through sudo).
set -euo pipefail

pkgs=(
    build-essential cmake pkg-config
    libuv1-dev liblmdb-dev libxxhash-dev libyaml-dev
    libsodium-dev libssl-dev openssl
    check libmsgpack-dev # tests only: Check, and msgpack-c as the wire
                         # tests' independent msgpack implementation
    clang clang-format libclang-rt-14-dev
    redis-tools redis-server python3-redis
    python3 procps iproute2 curl
    python3-yaml # tests only: tests/deploy reads the k8s and compose files
    iptables # tests only: the partitions of tests/cluster/partition.py
)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
        missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# redis-server's package starts a system instance on 6379; the benchmark
# starts its own on another port, so the system one is stopped.
if printf '%s\n' "${missing[@]}" | grep -qx redis-server; then
    (service redis-server stop || systemctl stop redis-server) >/dev/null 2>&1 || true
fi
