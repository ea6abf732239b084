#!/usr/bin/env bash
# Runs a command inside a QEMU guest that has a real soft-RoCE device (rdma_rxe), for
# machines whose own kernel has no RDMA support. See docs/softroce.md and --help.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo_root
readonly helper_dir=$repo_root/scripts/softroce-vm
readonly exit_timeout=124 exit_harness=125 exit_usage=2

usage() {
  cat <<EOF
Usage: scripts/softroce-vm.sh [OPTIONS] -- COMMAND [ARG...]
       scripts/softroce-vm.sh [OPTIONS] --self-test
       scripts/softroce-vm.sh [OPTIONS] --build-only

Runs COMMAND as root inside a QEMU guest (TCG emulation, Debian's bookworm kernel) that has
a soft-RoCE device rxe0 (port 1 ACTIVE, RoCE v2 GID index 1 = 192.0.2.1 on a dummy netdev)
and Open MPI. Host directories are shared read-write at the same absolute paths, so a build
tree (and its RPATHs) works unchanged. Binaries must be built portably: the guest CPU has
no AVX-512, so -march=native binaries from this host die with SIGILL.

The guest (kernel + initramfs, ~240 MB) is built on first use and cached; it is rebuilt
only when its package list, module list, init or build script, the Debian kernel version or
the host's versions of the guest's packages change. Building needs root and the Debian
archive; booting does not.

Options:
  --build-dir DIR    CMake build tree: shared into the guest together with its source tree
                     (CMAKE_HOME_DIRECTORY), and COMMAND's working directory.
  --share DIR        also share DIR (repeatable). The repository is always shared.
  --workdir DIR      working directory of COMMAND (must be shared). Default: --build-dir,
                     else the current directory if it is shared, else the repository.
  --env NAME=VALUE   set an environment variable for COMMAND (repeatable).
  --timeout SECONDS  hard limit on the guest (boot + COMMAND + power-off). Default: 900.
  --memory MB        guest memory. Default: 2048.
  --cpus N           guest vCPUs. Default: 2.
  --9p-cache MODE    9p cache mode of the shared directories: loose (default; the guest
                     caches files, ~8x faster process start-up; the host must not change
                     the shared files while the guest runs) or none (always coherent).
  --cache-dir DIR    guest cache. Default: \$NETSPARSE_VM_CACHE, else /var/cache/netsparse-vm.
  --rebuild          rebuild the guest even if the cached one is current.
  --build-only       build (or check) the cached guest, then exit.
  --self-test        run the soft-RoCE smoke tests: ibv_devinfo, ibv_rc_pingpong, rping,
                     tests/softroce/verbs_smoke.c (built here with mpicc) on 2 MPI ranks,
                     and the checks of scripts/setup-rxe.sh.
  --no-install-deps  do not run scripts/install-deps.sh --vm first.
  --verbose          show all kernel messages on the console.
  --keep             keep the run's control directory (console.log, timings, cmd).
  -h, --help         this text.

Environment: NETSPARSE_VM_CACHE (cache directory), NETSPARSE_VM_KERNEL (Debian kernel package,
default: what linux-image-amd64 depends on), NETSPARSE_VM_MIRROR (apt source for the guest,
default: the host's Debian sources).

Inside the guest: Open MPI may run as root (OMPI_ALLOW_RUN_AS_ROOT*), and its defaults
(/etc/openmpi/openmpi-mca-params.conf) keep MPI on self,vader,tcp over lo with pml ob1.

Exit status: COMMAND's exit status; $exit_timeout if the timeout expired; $exit_harness if the guest could
not be built or booted, could not set up rxe0, or did not report a status; $exit_usage on usage errors.

Examples:
  scripts/softroce-vm.sh --self-test
  scripts/softroce-vm.sh --build-dir build-ci -- ctest -L verbs --output-on-failure
  scripts/softroce-vm.sh --build-dir build-ci -- mpirun -np 2 ./tests/transport/verbs_test
EOF
}

say() { printf 'netsparse-vm: %s\n' "$*" >&2; }
die() {
  local status=$1
  shift
  printf 'netsparse-vm: ERROR: %s\n' "$*" >&2
  exit "$status"
}

# ---- options -----------------------------------------------------------------------------
timeout_seconds=900
memory_mb=2048
ninep_cache=loose
cpus=2
cache_dir=${NETSPARSE_VM_CACHE:-/var/cache/netsparse-vm}
build_dir=
workdir=
shares=()
envs=()
mode=run
rebuild=0
install_deps=1
verbose=0
keep=0
command=()

need_value() { (($2 >= 2)) || die $exit_usage "$1 needs a value (see --help)"; }
while (($# > 0)); do
  case $1 in
    --build-dir) need_value "$1" $# && build_dir=$2 && shift 2 ;;
    --share) need_value "$1" $# && shares+=("$2") && shift 2 ;;
    --workdir) need_value "$1" $# && workdir=$2 && shift 2 ;;
    --env) need_value "$1" $# && envs+=("$2") && shift 2 ;;
    --timeout) need_value "$1" $# && timeout_seconds=$2 && shift 2 ;;
    --memory) need_value "$1" $# && memory_mb=$2 && shift 2 ;;
    --cpus) need_value "$1" $# && cpus=$2 && shift 2 ;;
    --9p-cache) need_value "$1" $# && ninep_cache=$2 && shift 2 ;;
    --cache-dir) need_value "$1" $# && cache_dir=$2 && shift 2 ;;
    --build-dir=* | --share=* | --workdir=* | --env=* | --timeout=* | --memory=* | --cpus=* | --9p-cache=* | --cache-dir=*)
      set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
    --rebuild) rebuild=1 && shift ;;
    --build-only) mode=build-only && shift ;;
    --self-test) mode=self-test && shift ;;
    --no-install-deps) install_deps=0 && shift ;;
    --verbose) verbose=1 && shift ;;
    --keep) keep=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    --) shift && command=("$@") && break ;;
    *) die $exit_usage "unknown argument '$1' (the command goes after --; see --help)" ;;
  esac
done

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && (($1 > 0)); }
is_uint "$timeout_seconds" || die $exit_usage "--timeout must be a positive number of seconds"
is_uint "$memory_mb" || die $exit_usage "--memory must be a positive number of MB"
# The ~200 MB initramfs is held twice while the kernel unpacks it, then tests need room.
((memory_mb >= 768)) || die $exit_usage "--memory must be at least 768 MB (the root filesystem lives in RAM)"
is_uint "$cpus" || die $exit_usage "--cpus must be a positive number"
[[ $ninep_cache == loose || $ninep_cache == none ]] || die $exit_usage "--9p-cache must be loose or none"
case $mode in
  run) ((${#command[@]} > 0)) || die $exit_usage "no command given (put it after --; see --help)" ;;
  *) ((${#command[@]} == 0)) || die $exit_usage "--$mode takes no command" ;;
esac
for e in "${envs[@]}"; do
  [[ $e =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die $exit_usage "--env needs NAME=VALUE, got '$e'"
done

# ---- shares and working directory (checked before anything slow) ------------------------
absolute_dir() {
  [[ -d $1 ]] || die $exit_usage "$2 '$1' is not a directory"
  (cd "$1" && pwd -P)
}

# A share is mounted over the guest's own tree at the same path: it must not cover the
# guest's system directories (a new directory such as /var/lib/ci/workspace is fine).
check_shareable() {
  local system
  case $1 in
    / | /var | /var/lib | /var/cache | /var/log)
      die $exit_usage "cannot share $1: it would cover the guest's own system directories" ;;
  esac
  for system in /bin /boot /dev /etc /lib /lib32 /lib64 /libx32 /proc /run /sbin /sys /usr; do
    if [[ $1 == "$system" || $1 == "$system"/* ]]; then
      die $exit_usage "cannot share $1: it would cover the guest's $system"
    fi
  done
}

share_dirs=("$(cd "$repo_root" && pwd -P)")
if [[ -n $build_dir ]]; then
  build_dir=$(absolute_dir "$build_dir" --build-dir)
  share_dirs+=("$build_dir")
  if [[ -f $build_dir/CMakeCache.txt ]]; then
    source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build_dir/CMakeCache.txt")
    [[ -n $source_dir && -d $source_dir ]] && share_dirs+=("$(cd "$source_dir" && pwd -P)")
    if grep -Eq -- '-march=native|^NETSPARSE_ARCH:[A-Z]+=native' "$build_dir/CMakeCache.txt"; then
      say "WARNING: $build_dir was configured with -march=native; its binaries may die with"
      say "WARNING: SIGILL in the guest (no AVX-512 there). Configure it with NETSPARSE_ARCH empty."
    fi
  fi
fi
for dir in "${shares[@]}"; do share_dirs+=("$(absolute_dir "$dir" --share)"); done
if [[ -z $workdir ]]; then
  workdir=${build_dir:-$PWD}
fi
workdir=$(absolute_dir "$workdir" --workdir)

# Drop shares inside other shares (they are visible through the outer one).
mapfile -t share_dirs < <(printf '%s\n' "${share_dirs[@]}" | LC_ALL=C sort -u)
mounts=()
for dir in "${share_dirs[@]}"; do
  [[ $dir != *$'\t'* && $dir != *$'\n'* ]] || die $exit_usage "cannot share a path with a tab or newline: $dir"
  check_shareable "$dir"
  inside=0
  for outer in "${mounts[@]}"; do
    [[ $dir == "$outer" || $dir == "$outer"/* ]] && inside=1
  done
  ((inside)) || mounts+=("$dir")
done
workdir_shared=0
for dir in "${mounts[@]}"; do
  [[ $workdir == "$dir" || $workdir == "$dir"/* ]] && workdir_shared=1
done
if ((!workdir_shared)); then
  [[ -n $build_dir || $workdir != "$PWD" ]] && die $exit_usage "--workdir $workdir is not inside a shared directory"
  workdir=${mounts[0]}
fi

# ---- host packages -----------------------------------------------------------------------
if ((install_deps)); then
  "$repo_root/scripts/install-deps.sh" --vm >&2 || die $exit_harness "scripts/install-deps.sh --vm failed"
fi
for tool in qemu-system-x86_64 mmdebstrap cpio depmod xz timeout flock; do
  command -v "$tool" >/dev/null || die $exit_harness "$tool not found; run scripts/install-deps.sh --vm"
done

# ---- the cached guest --------------------------------------------------------------------
read_list() { sed -e 's/#.*//' "$1" | tr -s ' \t' '\n' | sed '/^$/d'; }

# The Debian kernel package the guest boots: the one the host's linux-image-amd64 depends
# on (bookworm's current ABI), unless NETSPARSE_VM_KERNEL names one.
kernel_package_candidate() {
  if [[ -n ${NETSPARSE_VM_KERNEL:-} ]]; then
    echo "$NETSPARSE_VM_KERNEL"
    return
  fi
  # (|| true: apt-cache fails for an unknown package, or dies of SIGPIPE after awk's exit.)
  apt-cache depends linux-image-amd64 2>/dev/null |
    awk '$1 ~ /Depends:/ && $2 ~ /^linux-image-[0-9]/ { print $2; exit }' || true
}

resolve_kernel() {
  kernel_package=$(kernel_package_candidate)
  if [[ -z $kernel_package ]]; then
    say "apt has no linux-image-amd64 candidate yet; running apt-get update"
    apt-get update -qq >&2 || true
    kernel_package=$(kernel_package_candidate)
  fi
  kernel_version=
  if [[ -n $kernel_package ]]; then
    kernel_version=$(apt-cache policy "$kernel_package" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" { print $2 }' || true)
  fi
}

# Everything the guest image is made of; its hash names the cached guest.
guest_stamp() {
  echo "kernel $kernel_package $kernel_version"
  echo "suite $suite"
  echo "mirror ${NETSPARSE_VM_MIRROR:-host}"
  (cd "$helper_dir" && sha256sum build-guest.sh init packages.txt modules.txt openmpi-mca-params.conf)
  # The host's versions of the guest packages: a host upgrade rebuilds the guest so that
  # host-built binaries keep finding the same libraries there.
  mapfile -t guest_packages < <(read_list "$helper_dir/packages.txt")
  dpkg-query -W -f='host ${Package} ${Version}\n' "${guest_packages[@]}" 2>/dev/null | sort || true
}

ensure_guest() {
  local start=$SECONDS
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [[ -n $suite ]] || die $exit_harness "cannot tell the host's Debian release from /etc/os-release"
  mkdir -p "$cache_dir" || die $exit_harness "cannot create the cache directory $cache_dir"
  resolve_kernel
  if [[ -z $kernel_package || -z $kernel_version ]]; then
    [[ -z ${NETSPARSE_VM_KERNEL:-} ]] ||
      die $exit_harness "apt has no candidate for NETSPARSE_VM_KERNEL=$NETSPARSE_VM_KERNEL"
    # Without apt metadata, a cached guest is still better than nothing.
    guest_dir=$(ls -1td "$cache_dir"/guest-*/ 2>/dev/null | head -n 1 || true)
    guest_dir=${guest_dir%/}
    [[ -n $guest_dir && -f $guest_dir/stamp ]] ||
      die $exit_harness "cannot resolve Debian's linux-image-amd64 with apt, and no cached guest in $cache_dir"
    say "WARNING: apt cannot resolve the kernel package; using the newest cached guest $guest_dir"
    guest_build_seconds=0
    return
  fi
  local stamp hash
  stamp=$(guest_stamp)
  hash=$(sha256sum <<<"$stamp" | cut -c1-16)
  guest_dir=$cache_dir/guest-$hash

  exec {lock_fd}>"$cache_dir/lock"
  if ! flock -n "$lock_fd"; then
    say "waiting for another run that holds $cache_dir/lock"
    flock "$lock_fd"
  fi
  if ((rebuild)) || [[ ! -f $guest_dir/stamp ]]; then
    [[ $(id -u) -eq 0 ]] || die $exit_harness "the guest in $cache_dir must be (re)built, which needs root"
    say "building the guest ($kernel_package $kernel_version, $suite) into $guest_dir"
    rm -rf "$guest_dir"
    if ! "$helper_dir/build-guest.sh" "$guest_dir.tmp" "$kernel_package" "$suite"; then
      rm -rf "$guest_dir.tmp"
      die $exit_harness "building the guest failed (see the messages above)"
    fi
    echo "$stamp" >"$guest_dir.tmp/stamp"
    mv "$guest_dir.tmp" "$guest_dir"
    # Keep the two most recently used guests (another clone may use the other one).
    ls -1td "$cache_dir"/guest-*/ | tail -n +3 | while read -r old; do rm -rf "$old"; done
    guest_build_seconds=$((SECONDS - start))
    say "guest built in $guest_build_seconds s: $(du -sm "$guest_dir" | cut -f1) MB in $guest_dir"
  else
    touch "$guest_dir"
    guest_build_seconds=0
  fi
  flock -u "$lock_fd"
}

guest_dir=
guest_build_seconds=0
ensure_guest
if [[ $mode == build-only ]]; then
  say "guest ready: $guest_dir (kernel $(cat "$guest_dir/kernel-version"))"
  exit 0
fi

# ---- the run's control directory ---------------------------------------------------------
ctl=$(mktemp -d "${TMPDIR:-/tmp}/netsparse-vm.XXXXXX")
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  if ((keep)); then
    say "kept the control directory $ctl"
  else
    rm -rf "$ctl"
  fi
}
trap cleanup EXIT

if [[ $mode == self-test ]]; then
  command -v mpicc >/dev/null || die $exit_harness "mpicc not found; run scripts/install-deps.sh"
  # Portable code generation (no -march=native): the guest CPU lacks the host's AVX-512.
  mpicc -std=c11 -O2 -Wall -Wextra -o "$ctl/verbs_smoke" "$repo_root/tests/softroce/verbs_smoke.c" \
    -libverbs || die $exit_harness "building tests/softroce/verbs_smoke.c failed"
  # Both scripts always run; the status is non-zero if either failed.
  # shellcheck disable=SC2016 # expanded by the guest's bash
  command=(bash -c 'bash "$1" "$2"; smoke=$?; bash "$3"; setup=$?; ((smoke == 0 && setup == 0))'
    self-test "$repo_root/tests/softroce/smoke.sh" "$ctl/verbs_smoke"
    "$repo_root/tests/softroce/setup_rxe_check.sh")
fi

{
  for i in "${!mounts[@]}"; do printf 'nsvm%d\t%s\t%s\n' "$i" "$ninep_cache" "${mounts[$i]}"; done
} >"$ctl/shares"
{
  for e in "${envs[@]}"; do printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"; done
} >"$ctl/env"
{
  echo '#!/bin/bash'
  echo '# Written by scripts/softroce-vm.sh; run by the guest /init.'
  printf 'source %q\n' "$ctl/env"
  printf 'cd %q || exit %d\n' "$workdir" "$exit_harness"
  printf 'echo %q\n' "netsparse-vm: \$ $(printf '%q ' "${command[@]}")"
  printf 'exec'
  printf ' %q' "${command[@]}"
  printf '\n'
} >"$ctl/cmd"

# ---- boot --------------------------------------------------------------------------------
# edd=off: skip the BIOS disk probe (there are no disks).
append="console=ttyS0 panic=-1 edd=off nsvm_ctl=$ctl"
((verbose)) || append+=" quiet"
# The uncompressed kernel boots through PVH, skipping ~3 s of self-decompression under TCG.
kernel_image=$guest_dir/vmlinux
[[ -f $kernel_image ]] || kernel_image=$guest_dir/vmlinuz
# qboot (from qemu-system-data) starts faster than SeaBIOS and prints nothing.
firmware=()
[[ -f /usr/share/qemu/qboot.rom ]] && firmware=(-bios /usr/share/qemu/qboot.rom)
# shellcheck disable=SC2054 # the commas belong to qemu's option syntax
qemu=(qemu-system-x86_64
  -accel tcg,thread=multi -cpu max -m "$memory_mb" -smp "$cpus"
  -nodefaults -no-user-config -nographic -serial stdio -nic none -no-reboot "${firmware[@]}"
  -kernel "$kernel_image" -initrd "$guest_dir/initrd.cpio" -append "$append"
  -pidfile "$ctl/qemu.pid"
  -virtfs "local,path=$ctl,mount_tag=nsvmctl,security_model=none,multidevs=remap")
for i in "${!mounts[@]}"; do
  qemu+=(-virtfs "local,path=${mounts[$i]},mount_tag=nsvm$i,security_model=none,multidevs=remap")
done

say "guest: $(basename "$guest_dir") (kernel $(cat "$guest_dir/kernel-version")), ${cpus} vCPUs, ${memory_mb} MB, timeout ${timeout_seconds} s"
say "shared: ${mounts[*]}; working directory: $workdir"
qemu_start=$(date +%s.%N)
# Run in the background so a signal to this script can stop qemu at once (through its pid
# file); timeout(1) bounds a hung guest even if this script is killed outright.
(
  set +e
  timeout --kill-after=10 "$timeout_seconds" "${qemu[@]}" </dev/null 2>&1 |
    sed -u 's/\r$//' | tee "$ctl/console.log"
  exit "${PIPESTATUS[0]}"
) &
runner=$!
interrupted=0
# shellcheck disable=SC2317 # called by the signal trap
stop_guest() {
  interrupted=1
  if [[ -f $ctl/qemu.pid ]]; then kill -TERM "$(cat "$ctl/qemu.pid")" 2>/dev/null || true; fi
}
trap stop_guest INT TERM HUP
qemu_status=0
while :; do
  wait "$runner" && qemu_status=0 || qemu_status=$?
  kill -0 "$runner" 2>/dev/null || break
done
trap - INT TERM HUP
qemu_seconds=$(awk -v s="$qemu_start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')

# ---- verdict -----------------------------------------------------------------------------
timing() { awk -v k="$1" '$1 == k { print $2 }' "$ctl/timings" 2>/dev/null || true; }
t_init=$(timing init)
t_ready=$(timing ready)
t_done=$(timing finished)
report_timings() {
  local line="guest build ${guest_build_seconds} s"
  ((guest_build_seconds)) || line+=" (cached)"
  line+=", qemu ${qemu_seconds} s"
  if [[ -n $t_init && -n $t_ready && -n $t_done ]]; then
    line+=$(awk -v q="$qemu_seconds" -v i="$t_init" -v r="$t_ready" -v d="$t_done" 'BEGIN {
      printf " = boot to /init + power-off %.1f s, rxe setup %.1f s, command %.1f s", q - (d - i), r - i, d - r }')
  elif [[ -n $t_init ]]; then
    line+=" (kernel reached /init after ${t_init} s of uptime)"
  fi
  say "timings: $line"
}
report_timings

if ((interrupted)); then
  die 130 "interrupted; the guest was stopped"
fi
if [[ -f $ctl/status ]]; then
  status=$(cat "$ctl/status")
  [[ $status =~ ^[0-9]+$ ]] || die $exit_harness "the guest wrote a malformed status '$status'"
  say "command exit status: $status"
  exit "$status"
fi
if [[ -f $ctl/setup-error ]]; then
  die $exit_harness "guest setup failed: $(cat "$ctl/setup-error")"
fi
if ((qemu_status == 124 || qemu_status == 137)); then
  die $exit_timeout "TIMEOUT: the guest did not finish within ${timeout_seconds} s (qemu killed)"
fi
if grep -q 'Kernel panic' "$ctl/console.log" 2>/dev/null; then
  die $exit_harness "the guest kernel panicked (see the console above)"
fi
die $exit_harness "the guest did not report an exit status (qemu exit status $qemu_status; boot failure?)"
