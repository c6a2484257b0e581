#!/bin/sh
# compose.sh - a ringkv cluster in containers built from your own build (no
# registry needed): NODES nodes (default 6), two seeds, racks rack1..rack3
# in turn (node1 rack1, node2 rack2, node3 rack3, node4 rack1, ...), RF 3.
#
#   ./scripts/compose.sh up      [BUILD_DIR]  (make compose [NODES=6])
#   ./scripts/compose.sh add     [BUILD_DIR]  (make compose-add)
#   ./scripts/compose.sh remove  NODE         (make compose-remove NODE=node4)
#   ./scripts/compose.sh status               (ringkv status from a node)
#   ./scripts/compose.sh down                 (make compose-stop; keeps data)
#   ./scripts/compose.sh destroy              (down; delete the volumes too)
#   ./scripts/compose.sh gen     N...         (print the compose file of
#                                              nodes N...; see below)
#
# `up` builds the image ringkv:local from BUILD_DIR (default build) with
# scripts/docker-image.sh, writes a random cluster secret to
# run/compose/secret the first time, makes the cluster's CA and a
# certificate per node with the openssl CLI (run/compose/<project>/pki:
# the nodes speak mutual TLS to each other, internode_tls: required, and
# offer RESP in TLS on 6380), starts node1..nodeNODES (and any node
# added since) as the project "ringkv" and waits until they are all UN.
# `add` starts the next node (the lowest number not in use) and waits for
# it to be UN, having streamed its ranges in. `remove NODE` decommissions
# NODE (waiting, with progress, until it has pushed its ranges and left),
# then deletes its container and its volume (keeping its log in
# run/compose/<project>/NODE.log), so that a later `up` starts that number
# afresh.
#
# The compose file: deploy/docker-compose.yml is `gen 1 2 3 4 5 6`; the
# cluster's own, with the nodes it has now, is written to
# run/compose/<project>/docker-compose.yml at each step (its list of nodes
# in run/compose/<project>/nodes). Node N is at $RINGKV_NET.(10+N).
#
# Environment: RINGKV_NET (default 172.28.5) picks the network,
# RINGKV_PROJECT (default ringkv) the compose project, RINGKV_IMAGE the
# image tag, RINGKV_SECRET_FILE the cluster secret (default
# run/compose/secret), RINGKV_PKI_DIR the CA and the nodes' certificates
# (default run/compose/<project>/pki; made where missing, never replaced:
# put your own there to use them), RINGKV_COMPOSE_OVERRIDE an extra compose file laid
# over it. Any RINGKV_<KEY> that the compose file reads can be set too.
set -eu

cmd=${1:-up}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
net=${RINGKV_NET:-172.28.5}
project=${RINGKV_PROJECT:-ringkv}
state="$root/run/compose/$project"
export RINGKV_NET="$net"
export RINGKV_SECRET_FILE="${RINGKV_SECRET_FILE:-$root/run/compose/secret}"
export RINGKV_PKI_DIR="${RINGKV_PKI_DIR:-$state/pki}"

die() {
    echo "compose: $*" >&2
    exit 1
}

rack_of() { echo "rack$((($1 - 1) % 3 + 1))"; }

# dies unless $2 is a node number or count, 1..200 ($1 says what it is)
number() {
    case "$2" in '' | *[!0-9]*) die "$1 '$2': a number, 1..200" ;; esac
    [ "$2" -ge 1 ] && [ "$2" -le 200 ] || die "$1 '$2': a number, 1..200"
}

# gen N... : the compose file of nodes N... on stdout
gen() {
    cat <<'EOT'
# A ringkv cluster: nodes in racks rack1..rack3 in turn, two seeds (node1,
# node2), RF 3 (docker-compose 1.29 or `docker compose`). Written by
# scripts/compose.sh (`gen 1 2 3 4 5 6`; do not edit by hand): start it
# with `make compose`, which builds the image from your build
# (scripts/docker-image.sh) and writes the cluster secret; to run
# docker-compose yourself, set RINGKV_SECRET_FILE to a file of random bytes
# (every node reads the same), RINGKV_PKI_DIR to a folder holding ca.crt and
# nodeN.crt / nodeN.key for each node (signed by that CA, naming nodeN; see
# `certs` in scripts/compose.sh) and RINGKV_IMAGE to the image built.
# docs/operations.md has the details, and how to add and remove nodes.
#
# Every setting is a RINGKV_<KEY> variable (docs/config.md). The nodes have
# fixed addresses on their own bridge network, so a container that comes
# back keeps its address and its peers find it where they left it: node N
# at ${RINGKV_NET}.(10+N) (default 172.28.5.x). From the Linux host they
# answer there directly, e.g.
#   redis-cli -h 172.28.5.11 PING
# and from anywhere through `docker exec <container> ringkv status`
# (RINGKV_HOST is the node's own address in its container). Each container
# is healthy when its node serves (`ringkv health`: /health/ready on 9180).
#
# TLS: the nodes speak mutual TLS to each other (internode_tls: required,
# each with its own certificate, nodeN.crt, signed by the cluster's CA,
# ca.crt) and RESP in TLS on 6380 besides plaintext RESP on 6379:
#   redis-cli --tls --cacert run/compose/ringkv/pki/ca.crt -h 172.28.5.11 -p 6380 PING
version: "3.7"

x-node-env: &node-env
  RINGKV_CLUSTER_NAME: ${RINGKV_CLUSTER_NAME:-compose}
  RINGKV_CLUSTER_SECRET_FILE: /run/secrets/cluster_secret
  RINGKV_SEEDS: ${RINGKV_NET:-172.28.5}.11,${RINGKV_NET:-172.28.5}.12
  RINGKV_REPLICATION: "dc1:3"
  RINGKV_DATACENTER: dc1
  RINGKV_NUM_TOKENS: ${RINGKV_NUM_TOKENS:-16}
  RINGKV_GOSSIP_INTERVAL_MS: ${RINGKV_GOSSIP_INTERVAL_MS:-1000}
  RINGKV_READ_TIMEOUT_MS: ${RINGKV_READ_TIMEOUT_MS:-2000}
  RINGKV_WRITE_TIMEOUT_MS: ${RINGKV_WRITE_TIMEOUT_MS:-2000}
  RINGKV_LOG_LEVEL: ${RINGKV_LOG_LEVEL:-info}
  RINGKV_INTERNODE_TLS: required
  RINGKV_TLS_CA_FILE: /run/secrets/cluster_ca
  RINGKV_TLS_PORT: "6380"
  ASAN_OPTIONS: ${ASAN_OPTIONS:-}

x-node: &node
  image: ${RINGKV_IMAGE:-ringkv:local}
  # SIGTERM drains the node; give it the time it needs
  stop_grace_period: 30s
  restart: "no"
  healthcheck:
    test: ["CMD", "/usr/bin/ringkv", "health"]
    interval: 5s
    timeout: 5s
    retries: 3
    start_period: 120s

services:
EOT
    for i in "$@"; do
        cat <<EOT
  node$i:
    <<: *node
    hostname: node$i
    secrets: [cluster_secret, cluster_ca, node${i}_crt, node${i}_key]
    environment:
      <<: *node-env
      RINGKV_NODE_NAME: node$i
      RINGKV_TLS_CERT_FILE: /run/secrets/node${i}_crt
      RINGKV_TLS_KEY_FILE: /run/secrets/node${i}_key
      RINGKV_RACK: $(rack_of "$i")
      RINGKV_LISTEN_ADDRESS: \${RINGKV_NET:-172.28.5}.$((10 + i))
      RINGKV_HOST: \${RINGKV_NET:-172.28.5}.$((10 + i))
    networks:
      ring: {ipv4_address: "\${RINGKV_NET:-172.28.5}.$((10 + i))"}
    volumes: ["node$i:/var/lib/ringkv"]

EOT
    done
    cat <<'EOT'
networks:
  ring:
    ipam:
      config:
        - subnet: ${RINGKV_NET:-172.28.5}.0/24

volumes:
EOT
    for i in "$@"; do
        echo "  node$i:"
    done
    cat <<'EOT'

secrets:
  cluster_secret:
    file: ${RINGKV_SECRET_FILE:-./cluster-secret}
  cluster_ca:
    file: ${RINGKV_PKI_DIR:-./pki}/ca.crt
EOT
    for i in "$@"; do
        cat <<EOT
  node${i}_crt:
    file: \${RINGKV_PKI_DIR:-./pki}/node$i.crt
  node${i}_key:
    file: \${RINGKV_PKI_DIR:-./pki}/node$i.key
EOT
    done
}

# certs N... : the CA (once) and node N's certificate and key, where
# missing, in RINGKV_PKI_DIR (openssl CLI; EC P-256). A node's certificate
# names it (CN and DNS SAN nodeN: what its peers check against the name it
# proves in the internode handshake) and its address (IP SAN: what
# `redis-cli --tls` dialing it checks); both serverAuth and clientAuth,
# since every node is both on the internode port.
certs() {
    command -v openssl >/dev/null ||
        die "openssl not found (Debian: apt-get install openssl)"
    mkdir -p "$RINGKV_PKI_DIR"
    (
        cd "$RINGKV_PKI_DIR"
        umask 077
        key() { openssl genpkey -algorithm EC \
            -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
        if [ ! -s ca.crt ] || [ ! -s ca.key ]; then
            key ca.key
            openssl req -x509 -new -key ca.key -days 3650 \
                -subj "/CN=ringkv compose CA ($project)" -out ca.crt \
                2>/dev/null || exit 1
        fi
        for i in "$@"; do
            [ -s "node$i.crt" ] && [ -s "node$i.key" ] && continue
            key "node$i.key"
            openssl req -new -key "node$i.key" -subj "/CN=node$i" \
                -out "node$i.csr" 2>/dev/null || exit 1
            printf 'subjectAltName=DNS:node%s,IP:%s.%s\nextendedKeyUsage=serverAuth,clientAuth\n' \
                "$i" "$net" $((10 + i)) >"node$i.ext"
            openssl x509 -req -in "node$i.csr" -CA ca.crt -CAkey ca.key \
                -CAcreateserial -days 825 -extfile "node$i.ext" \
                -out "node$i.crt" 2>/dev/null || exit 1
            rm -f "node$i.csr" "node$i.ext"
        done
        chmod 644 ./*.crt # keys stay 600: the nodes run as root
    ) || die "cannot make the certificates in $RINGKV_PKI_DIR"
}

nodes() { cat "$state/nodes" 2>/dev/null || true; }

# writes the cluster's compose file for the node numbers on stdin
write_file() {
    mkdir -p "$state"
    sort -n -u >"$state/nodes.new"
    mv "$state/nodes.new" "$state/nodes"
    # shellcheck disable=SC2046
    gen $(nodes) >"$state/docker-compose.yml"
}

compose() {
    docker-compose -p "$project" -f "$state/docker-compose.yml" \
        ${RINGKV_COMPOSE_OVERRIDE:+-f "$RINGKV_COMPOSE_OVERRIDE"} "$@"
}

# the nodes' addresses, comma-separated
ips() { nodes | awk -v n="$net" '{ printf "%s%s.%d", (NR > 1 ? "," : ""), n, 10 + $1 }'; }

status() {
    first=$(nodes | head -n 1)
    [ -n "$first" ] || die "no cluster here (./scripts/compose.sh up)"
    docker exec "${project}_node${first}_1" /usr/bin/ringkv -h "$(ips)" status
}

# waits (timeout $1 s) until status shows each node of the list UN (a
# node it does not start, one that was refused say, may be listed too)
all_up() {
    for i in $(nodes); do
        echo "$1" | grep -Eq "^UN .* node$i +rack[0-9]+ *\$" || return 1
    done
}
wait_up() {
    i=0
    until st=$(status 2>/dev/null) && all_up "$st"; do
        i=$((i + 1))
        [ $i -lt "$1" ] || {
            status || true
            die "not every node UN in $1 s (docker logs ${project}_node1_1)"
        }
        sleep 1
    done
    echo "$st"
}

image() {
    ./scripts/docker-image.sh "$1" "${RINGKV_IMAGE:-ringkv:local}"
    mkdir -p "$(dirname "$RINGKV_SECRET_FILE")"
    [ -s "$RINGKV_SECRET_FILE" ] ||
        (umask 077 && head -c 32 /dev/urandom | base64 >"$RINGKV_SECRET_FILE")
}

command -v docker-compose >/dev/null || [ "$cmd" = gen ] ||
    die "docker-compose not found (Debian: apt-get install docker-compose)"

case "$cmd" in
gen)
    shift
    [ $# -gt 0 ] || die "gen: give node numbers"
    for i in "$@"; do number "gen: node" "$i"; done
    gen "$@"
    ;;
up)
    n=${NODES:-6}
    number NODES "$n"
    image "${2:-build}"
    { nodes; seq 1 "$n"; } | write_file
    # shellcheck disable=SC2046
    certs $(nodes)
    compose up -d
    count=$(nodes | wc -l)
    wait_up $((60 + 20 * count))
    cat <<EOT

$count nodes in containers, node N at $net.(10+N) (Redis protocol 6379,
native 7380, metrics 9180, health $net.11:9180/health, RESP in TLS 6380;
mutual TLS between the nodes, certificates in $RINGKV_PKI_DIR). Try:
  redis-cli -h $net.11 SET greeting hello
  redis-cli -h $net.13 GET greeting
  redis-cli --tls --cacert $RINGKV_PKI_DIR/ca.crt -h $net.12 -p 6380 GET greeting
  docker exec ${project}_node2_1 ringkv get greeting
  docker exec ${project}_node2_1 redis-cli -h $net.12 GET greeting
  make compose-add                 (one more node joins, streaming its share)
  make compose-remove NODE=node4   (decommission node4, delete it and its data)
Stop with: make compose-stop (data kept; ./scripts/compose.sh destroy deletes it)
EOT
    ;;
add)
    [ -s "$state/nodes" ] || die "no cluster here (make compose first)"
    image "${2:-build}"
    i=1
    while nodes | grep -qx "$i"; do i=$((i + 1)); done
    [ "$i" -le 200 ] || die "200 nodes already"
    { nodes; echo "$i"; } | write_file
    certs "$i"
    compose up -d "node$i"
    echo "node$i ($net.$((10 + i)), $(rack_of "$i")) joining"
    wait_up 600
    ;;
remove)
    name=${2:-}
    i=${name#node}
    case "$i" in '' | *[!0-9]*) die "remove: name a node (node4)" ;; esac
    nodes | grep -qx "$i" || die "remove: $name is not in this cluster ($(nodes | sed 's/^/node/' | tr '\n' ' '))"
    [ "$(nodes | wc -l)" -gt 3 ] ||
        die "remove: 3 nodes left; RF 3 needs them (destroy removes all)"
    # asked through another node, which answers as the leaver streams
    other=$(nodes | grep -vx "$i" | head -n 1)
    docker exec "${project}_node${other}_1" /usr/bin/ringkv \
        -h "$net.$((10 + i))" decommission --wait ||
        die "decommission of $name failed; it is still in the cluster"
    # it stops by itself once it has left
    code=$(timeout 60 docker wait "${project}_${name}_1" || echo "?")
    docker logs "${project}_${name}_1" >"$state/$name.log" 2>&1 || true
    nodes | grep -vx "$i" | write_file
    # the service is gone from the file: --remove-orphans would take
    # others' too, so by name
    docker rm -f "${project}_${name}_1" >/dev/null
    docker volume rm "${project}_${name}" >/dev/null
    echo "$name left the cluster and exited $code; its container and volume are deleted (its log: $state/$name.log)"
    wait_up 120
    ;;
status) status ;;
down)
    [ -s "$state/nodes" ] || exit 0
    compose stop && compose rm -f
    ;;
destroy)
    # a cluster made before compose.sh kept its list: the default six
    [ -s "$state/nodes" ] || seq 1 6 | write_file
    compose down -v --remove-orphans
    rm -rf "$state"
    ;;
*) die "unknown command '$cmd' (up, add, remove, status, down, destroy, gen)" ;;
esac
