#!/bin/sh
# compose.sh - the three-node cluster of deploy/docker-compose.yml, in
# containers built from your own build (no registry needed).
#
#   ./scripts/compose.sh up     [BUILD_DIR]   (make compose)
#   ./scripts/compose.sh status [BUILD_DIR]
#   ./scripts/compose.sh down   [BUILD_DIR]   (make compose-stop; keeps data)
#   ./scripts/compose.sh destroy [BUILD_DIR]  (down and delete the volumes)
#
# `up` builds the image ringkv:local from BUILD_DIR (default build) with
# scripts/docker-image.sh, writes a random cluster secret to
# run/compose/secret the first time, starts the project "ringkv" and waits
# until node1 sees three nodes UN. RINGKV_NET (default 172.28.5) picks the
# network: nodes at $RINGKV_NET.11-13. Any RINGKV_<KEY> that
# deploy/docker-compose.yml reads can be set in the environment.
set -eu

cmd=${1:-up}
build=${2:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
net=${RINGKV_NET:-172.28.5}
export RINGKV_NET="$net"
export RINGKV_SECRET_FILE="$root/run/compose/secret"
compose() {
    docker-compose -p "${RINGKV_PROJECT:-ringkv}" -f deploy/docker-compose.yml "$@"
}
die() {
    echo "compose: $*" >&2
    exit 1
}
command -v docker-compose >/dev/null ||
    die "docker-compose not found (Debian: apt-get install docker-compose)"

status() {
    docker exec "${RINGKV_PROJECT:-ringkv}_node1_1" /usr/bin/ringkv \
        -h "$net.11,$net.12,$net.13" status
}

case "$cmd" in
up)
    ./scripts/docker-image.sh "$build" "${RINGKV_IMAGE:-ringkv:local}"
    mkdir -p run/compose
    [ -s "$RINGKV_SECRET_FILE" ] ||
        (umask 077 && head -c 32 /dev/urandom | base64 >"$RINGKV_SECRET_FILE")
    compose up -d
    i=0
    until [ "$(status 2>/dev/null | grep -c '^UN ')" = 3 ]; do
        i=$((i + 1))
        [ $i -lt 60 ] || { status || true; die "the cluster did not come up in 60 s (docker logs ${RINGKV_PROJECT:-ringkv}_node1_1)"; }
        sleep 1
    done
    status
    cat <<EOT

Three nodes in containers, at $net.11-13 (Redis protocol 6379, native 7380,
metrics 9180). Try:
  redis-cli -h $net.11 SET greeting hello
  redis-cli -h $net.13 GET greeting
  docker exec ${RINGKV_PROJECT:-ringkv}_node2_1 /usr/bin/ringkv -h $net.12 get greeting
  docker-compose -p ${RINGKV_PROJECT:-ringkv} -f deploy/docker-compose.yml kill node3
  docker-compose -p ${RINGKV_PROJECT:-ringkv} -f deploy/docker-compose.yml up -d node4   (a fourth node joins)
Stop with: make compose-stop (data kept; ./scripts/compose.sh destroy deletes it)
EOT
    ;;
status) status ;;
# --profile extra: node4 too, when it was added (docs/operations.md)
down) compose --profile extra stop && compose --profile extra rm -f ;;
destroy) compose --profile extra down -v ;;
*) die "unknown command '$cmd' (up, status, down, destroy)" ;;
esac
