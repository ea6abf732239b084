#!/usr/bin/env bash
# Creates a soft-RoCE device (rdma_rxe) on a network interface of THIS machine, for kernels
# that have rdma_rxe (Debian's, most distributions'). On a kernel without it, run the tests
# in the QEMU guest of scripts/softroce-vm.sh instead.
#
# Idempotent: if an rxe device is already bound to the interface, it is kept and verified.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: sudo scripts/setup-rxe.sh [--name DEVICE] [NETDEV]

Loads rdma_rxe, runs `rdma link add DEVICE type rxe netdev NETDEV` unless an rxe device is
already bound to NETDEV, and checks with ibv_devinfo that port 1 is PORT_ACTIVE.
  NETDEV         network interface (default: the interface of the default route). It should
                 be up and have an IPv4 address: RoCE v2 GIDs are made from its addresses.
  --name DEVICE  name of the new verbs device (default: rxe0).
  -h, --help     this text.
Remove it again with: sudo rdma link delete DEVICE
EOF
}

die() {
  printf 'setup-rxe: ERROR: %s\n' "$*" >&2
  exit 1
}
say() { printf 'setup-rxe: %s\n' "$*"; }

original_args=("$@")
device=rxe0
netdev=
while (($# > 0)); do
  case $1 in
    -h | --help) usage && exit 0 ;;
    --name)
      (($# >= 2)) || die "--name needs a value"
      device=$2
      shift 2
      ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *)
      [[ -z $netdev ]] || die "more than one NETDEV given (see --help)"
      netdev=$1
      shift
      ;;
  esac
done

[[ $(id -u) -eq 0 ]] || die "must run as root (modprobe and rdma link add need it): sudo $0 ${original_args[*]}"
for tool in ip:iproute2 rdma:iproute2 modprobe:kmod ibv_devinfo:ibverbs-utils; do
  command -v "${tool%%:*}" >/dev/null || die "${tool%%:*} not found; install the Debian package ${tool#*:}"
done

if [[ -z $netdev ]]; then
  netdev=$(ip -o route show default | awk '{ for (i = 1; i < NF; ++i) if ($i == "dev") { print $(i + 1); exit } }')
  [[ -n $netdev ]] || die "no default route to pick an interface from; name one: $0 NETDEV"
  say "using $netdev, the interface of the default route"
fi
# (Few processes on purpose: under emulation every fork costs tens of milliseconds.)
link=$(ip -o link show dev "$netdev" 2>/dev/null) || die "no network interface named '$netdev' (see: ip link)"
[[ $link =~ [\<,]UP[,\>] ]] || die "$netdev is down; bring it up first (ip link set $netdev up)"
if [[ $(ip -o -4 addr show dev "$netdev") != *inet* ]]; then
  say "WARNING: $netdev has no IPv4 address: there will be no IPv4-mapped RoCE v2 GID"
fi

# rdma_rxe may be a module or built in; either way /sys/module/rdma_rxe exists once it is there.
if [[ ! -d /sys/module/rdma_rxe ]]; then
  if [[ ! -e /proc/modules ]]; then
    die "this kernel ($(uname -r)) cannot load modules and has no built-in rdma_rxe; use scripts/softroce-vm.sh"
  fi
  modprobe rdma_rxe 2>/dev/null ||
    die "modprobe rdma_rxe failed: kernel $(uname -r) has no rdma_rxe module (CONFIG_RDMA_RXE); use scripts/softroce-vm.sh"
fi
# User-space verbs access; rdma_ucm only for librdmacm users (rping, rdma_cm based codes).
[[ -d /sys/module/ib_uverbs ]] || modprobe ib_uverbs 2>/dev/null || die "cannot load ib_uverbs"
[[ -d /sys/module/rdma_ucm ]] || modprobe rdma_ucm 2>/dev/null ||
  say "WARNING: rdma_ucm not available: librdmacm (rping) will not work; plain verbs will"

# `rdma link show` lines look like: "link rxe0/1 state ACTIVE physical_state LINK_UP netdev eth0".
links=$(rdma link show 2>/dev/null || true)
existing=$(awk -v nd="$netdev" '{ for (i = 1; i < NF; ++i) if ($i == "netdev" && $(i + 1) == nd) { split($2, a, "/"); print a[1]; exit } }' <<<"$links")
if [[ -n $existing ]]; then
  # Only an rxe device counts (a RoCE NIC's own device is bound to its netdev too); rxe
  # reports the vendor id 0xffffff.
  if [[ $(ibv_devinfo -d "$existing" 2>/dev/null) =~ vendor_id:[[:space:]]*0xffffff ]]; then
    say "$existing already exists on $netdev; keeping it"
    device=$existing
  else
    say "NOTE: $netdev already has the RDMA device $existing (hardware RoCE?); adding $device anyway"
    existing=
  fi
fi
if [[ -z $existing ]]; then
  if [[ -e /sys/class/infiniband/$device ]]; then
    die "a device named $device exists already (on another interface); choose another with --name, or remove it: rdma link delete $device"
  fi
  rdma link add "$device" type rxe netdev "$netdev" ||
    die "rdma link add $device type rxe netdev $netdev failed (missing crc32 crypto modules? see dmesg)"
  say "created $device on $netdev"
fi

# Prints the populated entries among the first 16 of the GID table and sets roce_v2_ipv4_index.
# (The table has up to 1024 entries; reading all of them is slow under emulation.)
show_gids() {
  local port_dir=/sys/class/infiniband/$1/ports/1 index gid type hex address
  roce_v2_ipv4_index=
  for index in {0..15}; do
    read -r gid 2>/dev/null <"$port_dir/gids/$index" || break
    [[ $gid == 0000:0000:0000:0000:0000:0000:0000:0000 ]] && continue
    read -r type 2>/dev/null <"$port_dir/gid_attrs/types/$index" || type=unknown
    if [[ $gid == 0000:0000:0000:0000:0000:ffff:* ]]; then
      hex=${gid:30:4}${gid:35:4}
      printf -v address '%d.%d.%d.%d' "0x${hex:0:2}" "0x${hex:2:2}" "0x${hex:4:2}" "0x${hex:6:2}"
      gid="::ffff:$address"
      [[ -z $roce_v2_ipv4_index && $type == "RoCE v2" ]] && roce_v2_ipv4_index=$index
    fi
    printf '  GID index %d: %s (%s)\n' "$index" "$gid" "$type"
  done
}

# The port turns ACTIVE asynchronously after the link is added.
for _ in {1..50}; do
  if [[ $(ibv_devinfo -d "$device" 2>/dev/null) =~ state:[[:space:]]*PORT_ACTIVE ]]; then
    say "$device port 1 is PORT_ACTIVE on $netdev"
    show_gids "$device"
    if [[ -n $roce_v2_ipv4_index ]]; then
      say "RoCE needs a GID index: use $roce_v2_ipv4_index (RoCE v2, IPv4), e.g. ibv_rc_pingpong -d $device -g $roce_v2_ipv4_index"
    else
      say "WARNING: no RoCE v2 GID with an IPv4 address yet (does $netdev have an IPv4 address?)"
    fi
    if [[ $(ulimit -l) != unlimited ]]; then
      say "NOTE: memlock limit is $(ulimit -l) KiB for this shell; non-root verbs users may need a higher one (limits.conf: memlock)"
    fi
    exit 0
  fi
  sleep 0.1
done
ibv_devinfo -d "$device" >&2 || true
die "$device port 1 did not become PORT_ACTIVE (is $netdev up with carrier?)"
