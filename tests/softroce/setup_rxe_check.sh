#!/usr/bin/env bash
# Checks scripts/setup-rxe.sh where it can really run: inside the soft-RoCE guest of
# scripts/softroce-vm.sh (run by its --self-test), whose /init already created rxe0 on the
# dummy netdev nsvm0. It adds a second dummy netdev and rxe device, so do NOT run it on a
# real machine. Ends with "N passed, N failed".
set -u
setup_rxe=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/setup-rxe.sh
if [[ $(hostname) != netsparse-vm ]]; then
  echo "setup_rxe_check.sh: only for the soft-RoCE guest (it changes network devices)" >&2
  exit 2
fi

passed=0
failed=0
# expect NAME STATUS REGEX COMMAND...: COMMAND exits with STATUS and prints a line matching REGEX.
expect() {
  local name=$1 want_status=$2 regex=$3
  shift 3
  local output status
  output=$("$@" 2>&1)
  status=$?
  echo "=== $name: $*"
  # shellcheck disable=SC2001 # indent every line
  sed 's/^/  /' <<<"$output"
  if ((status == want_status)) && grep -q -E "$regex" <<<"$output"; then
    echo "--- PASS $name"
    passed=$((passed + 1))
  else
    echo "--- FAIL $name (exit $status, expected $want_status and a line matching /$regex/)"
    failed=$((failed + 1))
  fi
}

expect "keeps the existing device" 0 'rxe0 already exists on nsvm0' "$setup_rxe" nsvm0
ip route add default dev nsvm0
expect "default-route interface" 0 'using nsvm0.*default route' "$setup_rxe"
expect "unknown interface" 1 "no network interface named 'nosuch0'" "$setup_rxe" nosuch0
ip link add nsvm1 type dummy
ip addr add 198.51.100.1/24 dev nsvm1
expect "interface down" 1 'nsvm1 is down' "$setup_rxe" --name rxe1 nsvm1
ip link set nsvm1 up
expect "name taken by another interface" 1 'a device named rxe0 exists already' "$setup_rxe" nsvm1
expect "creates a device" 0 'rxe1 port 1 is PORT_ACTIVE on nsvm1' "$setup_rxe" --name rxe1 nsvm1
expect "created device has the IPv4 GID" 0 'GID index 1: ::ffff:198\.51\.100\.1 \(RoCE v2\)' "$setup_rxe" --name rxe1 nsvm1
expect "second run is idempotent" 0 'rxe1 already exists on nsvm1; keeping it' "$setup_rxe" --name rxe1 nsvm1
rdma link delete rxe1
ip link delete nsvm1
ip route del default dev nsvm0
echo "setup-rxe-check: $passed passed, $failed failed"
((failed == 0))
