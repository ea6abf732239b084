#!/usr/bin/env bash
# Builds the soft-RoCE guest into OUT_DIR:
#   vmlinuz      Debian's kernel as packaged (bzImage);
#   vmlinux      the same kernel uncompressed (ELF, booted through PVH: under TCG this saves
#                the ~3 s the bzImage spends decompressing itself); absent if extraction fails;
#   initrd.cpio  an uncompressed cpio of a minimal Debian root filesystem with the module
#                subset, the guest /init and the Open MPI defaults (uncompressed because
#                decompressing 200 MB under TCG costs more boot time than reading it);
#   packages.installed, kernel-version: what is in it. Called by scripts/softroce-vm.sh,
# which holds the cache lock, decides when a rebuild is needed and writes the stamp.
#
#   build-guest.sh OUT_DIR KERNEL_PACKAGE SUITE
#
# Needs root: mmdebstrap runs in root mode so that the cpio archive carries real ownership.
# Environment: NETSPARSE_VM_MIRROR overrides the apt sources (one mmdebstrap MIRROR argument,
# e.g. "http://deb.debian.org/debian" or a sources file); by default the host's Debian sources
# are used, so the guest gets the same library versions as the host.
set -euo pipefail

if (($# != 3)); then
  echo "usage: $0 OUT_DIR KERNEL_PACKAGE SUITE" >&2
  exit 2
fi
out=$1
kernel_package=$2
suite=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf 'build-guest: %s\n' "$*" >&2; }
die() {
  printf 'build-guest: error: %s\n' "$*" >&2
  exit 1
}
# Words of a list file, comments and blank lines removed.
read_list() { sed -e 's/#.*//' "$1" | tr -s ' \t' '\n' | sed '/^$/d'; }

[[ $(id -u) -eq 0 ]] || die "building the guest needs root (mmdebstrap --mode=root)"
mkdir -p "$out"
work=$(mktemp -d "$out/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs

# ---- apt sources: the host's Debian entries ---------------------------------------------
mirrors=()
if [[ -n ${NETSPARSE_VM_MIRROR:-} ]]; then
  mirrors=("$NETSPARSE_VM_MIRROR")
else
  # Third-party repositories (their keys are not in the guest's keyring) are left out.
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    if grep -Eq '^[[:space:]]*(deb[[:space:]]|URIs:).*debian' "$f"; then
      mirrors+=("$f")
    fi
  done
  ((${#mirrors[@]} > 0)) || die "no Debian entry in the host's apt sources; set NETSPARSE_VM_MIRROR"
fi
log "apt sources: ${mirrors[*]}"

# ---- root filesystem ---------------------------------------------------------------------
packages=$(read_list "$here/packages.txt" | paste -sd, -)
t0=$SECONDS
# The merged-usr hook installs usr-is-merged instead of usrmerge (which drags in perl).
if ! mmdebstrap --variant=minbase --mode=root --format=directory --quiet \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --include="$packages" \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --dpkgopt='path-exclude=/usr/share/cmake-*/Help/*' \
  "$suite" "$rootfs" "${mirrors[@]}" >"$work/mmdebstrap.log" 2>&1; then
  tail -n 40 "$work/mmdebstrap.log" >&2
  die "mmdebstrap failed (last lines above)"
fi
log "root filesystem: $((SECONDS - t0)) s"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
  "$rootfs"/var/log/*

# ---- kernel and module subset ------------------------------------------------------------
t0=$SECONDS
(cd "$work" && apt-get download -q -o APT::Sandbox::User=root "$kernel_package" >&2) ||
  die "apt-get download $kernel_package failed"
kernel_tree=$work/kernel
dpkg-deb -x "$work"/"$kernel_package"_*.deb "$kernel_tree"
mapfile -t kernel_versions < <(ls "$kernel_tree/lib/modules")
((${#kernel_versions[@]} == 1)) || die "expected one module tree in $kernel_package"
kver=${kernel_versions[0]}
depmod -b "$kernel_tree" "$kver"
mapfile -t modules < <(read_list "$here/modules.txt")
# modprobe takes one module per call (further words would be module parameters); -C
# /dev/null keeps the host's modprobe.d options out of the answer.
for module in "${modules[@]}"; do
  modprobe -C /dev/null -d "$kernel_tree" -S "$kver" --show-depends "$module" ||
    die "module $module not found in $kernel_package"
done | awk '$1 == "insmod" { print $2 }' | sort -u >"$work/module-files"
while read -r file; do
  install -D -m 644 "$file" "$rootfs/${file#"$kernel_tree"/}"
done <"$work/module-files"
cp "$kernel_tree/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$rootfs/lib/modules/$kver/"
depmod -b "$rootfs" "$kver"
cp "$kernel_tree/boot/vmlinuz-$kver" "$work/vmlinuz"
# The bzImage carries the kernel as one xz stream; the uncompressed ELF has a PVH entry
# point (CONFIG_PVH) that QEMU's -kernel boots directly.
extract_vmlinux() {
  local offset
  grep -q '^CONFIG_PVH=y' "$kernel_tree/boot/config-$kver" || return 1
  offset=$(LC_ALL=C grep -m 1 -obUaP '\xfd7zXZ\x00' "$work/vmlinuz" | head -n 1 | cut -d: -f1)
  [[ -n $offset ]] || return 1
  # xz stops after the first stream (tail would die of SIGPIPE in a pipefail pipeline).
  xz -dc --single-stream < <(tail -c +$((offset + 1)) "$work/vmlinuz") >"$work/vmlinux" 2>/dev/null ||
    return 1
  cmp -s -n 4 "$work/vmlinux" <(printf '\177ELF')
}
if ! extract_vmlinux; then
  rm -f "$work/vmlinux"
  log "could not extract an uncompressed PVH kernel; the guest boots the bzImage (slower)"
fi
log "kernel $kver with $(wc -l <"$work/module-files") modules: $((SECONDS - t0)) s"

# ---- guest configuration -----------------------------------------------------------------
install -m 755 "$here/init" "$rootfs/init"
mkdir -p "$rootfs/etc/netsparse-vm"
printf '%s\n' "${modules[@]}" >"$rootfs/etc/netsparse-vm/modules"
echo "$kver" >"$rootfs/etc/netsparse-vm/kernel-version"
echo netsparse-vm >"$rootfs/etc/hostname"
printf '127.0.0.1\tlocalhost netsparse-vm\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$rootfs/etc/hosts"
cat "$here/openmpi-mca-params.conf" >>"$rootfs/etc/openmpi/openmpi-mca-params.conf"
# shellcheck disable=SC2016 # dpkg-query's own ${} fields
chroot "$rootfs" dpkg-query -W -f='${Package} ${Version}\n' >"$work/packages.installed"

# ---- initramfs ---------------------------------------------------------------------------
t0=$SECONDS
(cd "$rootfs" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
  cpio --null --create --format=newc --quiet) >"$work/initrd.cpio"
log "initramfs $(du -m "$work/initrd.cpio" | cut -f1) MB: $((SECONDS - t0)) s"

mv "$work/vmlinuz" "$work/initrd.cpio" "$work/packages.installed" "$out/"
[[ -f $work/vmlinux ]] && mv "$work/vmlinux" "$out/"
echo "$kver" >"$out/kernel-version"
