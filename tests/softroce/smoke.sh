#!/usr/bin/env bash
# Soft-RoCE smoke tests. Runs where an rxe device is up (inside the guest of
# scripts/softroce-vm.sh --self-test, or on a machine prepared by scripts/setup-rxe.sh):
#   1. ibv_devinfo: the device exists and port 1 is PORT_ACTIVE on an Ethernet link layer;
#   2. ibv_rc_pingpong: server and client (background + foreground) over one RC QP;
#   3. rping: the RDMA connection manager path (server + client);
#   4. verbs_smoke: 2 MPI ranks, RDMA WRITE / READ / SEND-RECV with byte checks.
# Usage: smoke.sh VERBS_SMOKE_BINARY [DEVICE] [IPV4_ADDRESS_OF_DEVICE_NETDEV]
# Ends with "N passed, N failed"; exit status 0 only when every test passed.
set -u

if (($# < 1)); then
  echo "usage: $0 VERBS_SMOKE_BINARY [DEVICE] [IPV4_ADDRESS]" >&2
  exit 2
fi
verbs_smoke=$1
device=${2:-rxe0}
address=${3:-192.0.2.1}
# RoCE v2 GID index of the IPv4-mapped address (index 0 is the IPv6 link-local one).
gid_index=1
# Each test is bounded so that a hang fails it instead of eating the guest's time budget.
per_test_timeout=90
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

passed=0
failed=0
run_test() {
  local name=$1
  shift
  local start=$SECONDS
  echo "=== $name"
  if "$@"; then
    echo "--- PASS $name ($((SECONDS - start)) s)"
    passed=$((passed + 1))
  else
    echo "--- FAIL $name ($((SECONDS - start)) s)"
    failed=$((failed + 1))
  fi
}

test_devinfo() {
  local info
  info=$(timeout "$per_test_timeout" ibv_devinfo -d "$device") || return 1
  echo "$info"
  grep -q 'state:[[:space:]]*PORT_ACTIVE' <<<"$info" &&
    grep -q 'link_layer:[[:space:]]*Ethernet' <<<"$info"
}

# Starts SERVER_CMD in the background, retries CLIENT_CMD until the server listens, and
# passes when both exit 0.
# The commands are plain word lists (no quoting inside), split on purpose.
# shellcheck disable=SC2086
client_server() {
  local name=$1 server_cmd=$2 client_cmd=$3
  timeout "$per_test_timeout" $server_cmd >"$log_dir/$name.server" 2>&1 &
  local server_pid=$! client_status=1
  for _ in $(seq 20); do
    if timeout "$per_test_timeout" $client_cmd >"$log_dir/$name.client" 2>&1; then
      client_status=0
      break
    fi
    # A client that reached the server and failed must not be retried.
    grep -q -i -E 'connect|refused|rdma_resolve' "$log_dir/$name.client" || break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.5
  done
  if ((client_status != 0)); then kill "$server_pid" 2>/dev/null; fi
  wait "$server_pid"
  local server_status=$?
  echo "server ($server_cmd), exit $server_status:"
  sed 's/^/  /' "$log_dir/$name.server"
  echo "client ($client_cmd), exit $client_status:"
  sed 's/^/  /' "$log_dir/$name.client"
  ((server_status == 0 && client_status == 0))
}

test_pingpong() {
  client_server pingpong "ibv_rc_pingpong -d $device -g $gid_index -n 100" \
    "ibv_rc_pingpong -d $device -g $gid_index -n 100 localhost"
}

test_rping() {
  client_server rping "rping -s -a $address -C 5" "rping -c -a $address -C 5 -v"
}

test_verbs_smoke() {
  local output
  output=$(timeout "$per_test_timeout" mpirun -np 2 --oversubscribe "$verbs_smoke" "$device" 2>&1)
  local status=$?
  echo "$output"
  ((status == 0)) && grep -q '^verbs_smoke: PASS$' <<<"$output"
}

run_test "ibv_devinfo ($device)" test_devinfo
run_test "ibv_rc_pingpong -g $gid_index (server + client on $device)" test_pingpong
run_test "rping ($address)" test_rping
run_test "verbs_smoke (mpirun -np 2)" test_verbs_smoke
echo "softroce-smoke: $passed passed, $failed failed"
((failed == 0))
