# tests/certs.sh: test certificates made at test time with openssl (nothing secret is
# committed). Source it, then:
#   ka_certs DIR SERVER-NAMES...
#     writes into DIR: ca.crt/ca.key (the pool's CA), server.crt/.key (signed by it,
#     serverAuth, one DNS name per SERVER-NAMES word: mbedtls 2.28 matches the server
#     name against DNS names only, so an address is given as a DNS name too),
#     exec.crt/.key (an executor's client certificate, clientAuth), and other-ca.crt
#     with rogue.crt/.key (a CA that is not the pool's, and an executor certificate it
#     signed: same subject as exec.crt). EC P-256 keys; valid 2 days. The commands are
#     docs/deploy.md's.
ka_certs_ca() { # DIR NAME
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=$2" -keyout "$1/$2.key" -out "$1/$2.crt" 2>"$1/openssl.log"
}
ka_certs_leaf() { # DIR CA NAME CN EXTENSIONS
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$4" \
    -keyout "$1/$3.key" -out "$1/$3.csr" 2>>"$1/openssl.log" &&
    printf '%b\n' "$5" >"$1/$3.ext" &&
    openssl x509 -req -in "$1/$3.csr" -CA "$1/$2.crt" -CAkey "$1/$2.key" -CAcreateserial \
      -days 2 -extfile "$1/$3.ext" -out "$1/$3.crt" 2>>"$1/openssl.log"
}
ka_certs() {
  d=$1
  shift
  san=""
  for n in "$@"; do san="${san:+$san,}DNS:$n"; done
  mkdir -p "$d" &&
    ka_certs_ca "$d" ca && ka_certs_ca "$d" other-ca &&
    ka_certs_leaf "$d" ca server "$1" "subjectAltName=$san\nextendedKeyUsage=serverAuth" &&
    ka_certs_leaf "$d" ca exec executor "extendedKeyUsage=clientAuth" &&
    ka_certs_leaf "$d" other-ca rogue executor "extendedKeyUsage=clientAuth" ||
    { echo "FAIL - openssl could not make the test certificates"; cat "$d/openssl.log"; return 1; }
}
