#!/bin/sh
# make-certs.sh DIR [NODE[=IP]...] - a test PKI made with the openssl CLI,
# as docs/operations.md ("TLS") tells an operator to make one:
#   ca.crt ca.key            the cluster's CA
#   NODE.crt NODE.key        per node (default n1 n2 n3), signed by the CA,
#                            CN and DNS SAN the node's name, IP SANs
#                            127.0.0.1 and IP (default 127.0.0.(index+1))
#   client.crt client.key    a client certificate (CN client)
#   wrong-ca.crt             another CA, and wrong.crt/wrong.key (CN n1)
#                            signed by it
#   expired.crt/.key         signed by the CA, valid in 2020 only
#   future.crt/.key          signed by the CA, valid from 2090
#   n1-new.crt/.key          a second certificate for n1 (rotation)
# Keys are EC P-256: quick to make.
set -eu
dir=$1
shift
[ $# -gt 0 ] || set -- n1 n2 n3
mkdir -p "$dir"
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
            -out "$1" 2>/dev/null; }

ca() { # name subject
    key "$1.key"
    openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 3650 \
        -out "$1.crt" 2>/dev/null
}

# cert name cn ca sans [x509 args]
cert() {
    n=$1 cn=$2 signer=$3 sans=$4
    shift 4
    key "$n.key"
    openssl req -new -key "$n.key" -subj "/CN=$cn" -out "$n.csr" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' \
        "$sans" >"$n.ext"
    openssl x509 -req -in "$n.csr" -CA "$signer.crt" -CAkey "$signer.key" \
        -CAcreateserial -extfile "$n.ext" -out "$n.crt" "$@" 2>/dev/null
    rm -f "$n.csr" "$n.ext"
}

# dated name cn startdate enddate: through `openssl ca`, which sets dates
dated() {
    n=$1 cn=$2
    mkdir -p ca.db
    : >ca.db/index.txt
    [ -f ca.db/serial ] || echo 1000 >ca.db/serial
    cat >ca.db/ca.cnf <<CNF
[ca]
default_ca = d
[d]
database = ca.db/index.txt
serial = ca.db/serial
new_certs_dir = ca.db
default_md = sha256
policy = p
unique_subject = no
copy_extensions = none
[p]
commonName = supplied
CNF
    key "$n.key"
    openssl req -new -key "$n.key" -subj "/CN=$cn" -out "$n.csr" 2>/dev/null
    openssl ca -batch -config ca.db/ca.cnf -cert ca.crt -keyfile ca.key \
        -startdate "$3" -enddate "$4" -in "$n.csr" -out "$n.crt" \
        -notext 2>/dev/null
    rm -f "$n.csr"
}

ca ca "ringkv test CA"
ca wrong-ca "another CA"
i=1
n1ip=127.0.0.2
for arg in "$@"; do
    i=$((i + 1))
    n=${arg%%=*}
    ip=127.0.0.$i
    [ "$n" = "$arg" ] || ip=${arg#*=}
    [ "$n" = n1 ] && n1ip=$ip
    cert "$n" "$n" ca "DNS:$n,IP:127.0.0.1,IP:$ip"
done
cert n1-new n1 ca "DNS:n1,IP:127.0.0.1,IP:$n1ip"
cert client client ca "DNS:client"
cert wrong n1 wrong-ca "DNS:n1,IP:127.0.0.1,IP:$n1ip"
dated expired n1 20200101000000Z 20200102000000Z
dated future n1 20900101000000Z 20900102000000Z
