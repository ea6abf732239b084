#!/usr/bin/env bash
# Fetches the real sparse matrices NetSparse tests and benchmarks use, from Debian's archive
# (the only archive our machines reach), into a cache directory:
#   scripts/fetch-matrices.sh [CACHE_DIR]
#   default CACHE_DIR: ${NETSPARSE_DATA_DIR:-$HOME/.cache/netsparse/matrices}
#
# Sources (pinned: the archive moves on, and every file's sha256 is checked):
#   - source package suitesparse 1:5.12.0+dfsg-2: Mongoose/Matrix/*.mtx (NotreDame_www and the
#     small fixtures);
#   - binary package libmetis-doc 5.1.0.dfsg-7: examples/graphs/{mdual,copter2}.graph.
# The machine's own apt configuration is never touched: a private APT_CONFIG in a scratch
# directory holds its own sources.list, package lists and download cache.
#
# Idempotent: files already present with the right hash are kept, and when all of them are
# present nothing is downloaded. A hash mismatch (in the cache or after download) is an error.
set -euo pipefail

cache_dir=${1:-${NETSPARSE_DATA_DIR:-$HOME/.cache/netsparse/matrices}}

suitesparse_version=1:5.12.0+dfsg-2
suitesparse_tarball=suitesparse_5.12.0+dfsg.orig.tar.xz
suitesparse_prefix=SuiteSparse-5.12.0/Mongoose/Matrix
metis_doc_version=5.1.0.dfsg-7
metis_doc_prefix=usr/share/doc/libmetis-dev/examples/graphs
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
mirror=${NETSPARSE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# name -> sha256 of the extracted file. The first three are from docs/data-facts.md; the small
# fixtures were hashed from the pinned source package.
declare -A mtx_sha256=(
  [NotreDame_www.mtx]=c54fddc40f0638ecd9fbb0cbc37b56b49f163777a6729d72546015fb96dbf497
  [Erdos971.mtx]=72be7941b11965503376f509e27fc8f8d124904538f422df70bec7aca34aa8cf
  [G51.mtx]=f6f64a8281889f5405e0209ec12766192c89ffe01e33c093c79702296296fedd
  [GD97_b.mtx]=e38efd7ab2fa247855fc893de626c128a6219b3f23de752e06a4c7bcaa149453
  [Pd.mtx]=4c3775bf9d7114e06235cc5d2ef1fd8483012bd609b25216788808082b9362f9
  [bcspwr01.mtx]=1a66044e50d1affbfa9c017c52546dac42bdccf3ab931490868c58d6a2bb0082
  [bcspwr02.mtx]=517f2d10378535c9e3c2b5936910eaafb23d44f6c70c0a55d0f250f28c67ecfa
  [bcspwr03.mtx]=32ff00035ed0f44bc04bc27ad060a21b2ad4a0588dcb087d26e8bd08614f20cd
  [bcspwr04.mtx]=059fce38865190986d1d893d3a6ac1767745472e285f6f8e487a7051b6eddc0d
  [bcspwr05.mtx]=819053c354e0cd8220332d09292d73b2c915b84393ef07869f522ae80b9da5cb
  [bcspwr06.mtx]=55fd815ee0c1fbfa35749201a8a133b8ea105cac994966bde146680400eac1cf
  [bcspwr07.mtx]=1b9135b1d72017ec01df1f409ab2149058f0f70790874f48f5cc4941be5d567a
  [bcspwr08.mtx]=b2d2f25ec7ca3b85b987941e4ad553766ce0eba73525b1747a07ed30c58bcd92
  [bcspwr09.mtx]=c396a96af9aab55af84522dd1b8d95ecb87c9c4b014f3597bc4f55067930b1ea
  [bcspwr10.mtx]=5011d5518a7d96ab054dadb8f0670fded73385548add1cfa75c43742523c3e33
  [dwt_992.mtx]=b0c6b249ae7c9781370477446b0cbdd050a0d5422488cec77ccd1e6e3f05e568
  [jagmesh7.mtx]=cdcd561da557ad706e645d5314c6b512db1269461f88805c02cc13340225757f
)
declare -A graph_sha256=(
  [mdual.graph]=fed97c608a1611ae1a4604620913e32c16ecd815550df1c1819fe492986c27b0
  [copter2.graph]=e073b74b349eac2887e4b963cf21a89f4bcd6d2860265ef1c049101cf72fa778
)

die() {
  echo "fetch-matrices: error: $*" >&2
  exit 1
}
log() { echo "fetch-matrices: $*"; }

for tool in apt-get dpkg tar xz sha256sum; do
  command -v "$tool" >/dev/null || die "'$tool' is required but not installed"
done
[[ -r $keyring ]] || die "$keyring not found (install the debian-archive-keyring package)"

mkdir -p "$cache_dir" || die "cannot create cache directory $cache_dir"
cache_dir=$(cd "$cache_dir" && pwd)

# Prints nothing and succeeds when $1 exists with sha256 $2.
has_right_hash() {
  [[ -f $1 ]] && [[ $(sha256sum "$1" | cut -d' ' -f1) == "$2" ]]
}

# Checks a freshly extracted file and moves it into the cache (atomically, so an interrupted
# run never leaves a half-written file under the final name).
install_checked() {
  local extracted=$1 name=$2 want=$3
  [[ -f $extracted ]] || die "$name not found in the downloaded package (expected at $extracted)"
  local got
  got=$(sha256sum "$extracted" | cut -d' ' -f1)
  [[ $got == "$want" ]] || die "sha256 mismatch for $name: expected $want, got $got"
  cp "$extracted" "$cache_dir/.$name.partial"
  mv -f "$cache_dir/.$name.partial" "$cache_dir/$name"
  log "installed $cache_dir/$name"
}

# Fills the array named $2 with the names of the table named $1 (name -> sha256), in order,
# that are not in the cache with the right sha256.
list_missing() {
  local -n table=$1 missing=$2
  missing=()
  local name
  for name in $(printf "%s\n" "${!table[@]}" | sort); do
    if has_right_hash "$cache_dir/$name" "${table[$name]}"; then continue; fi
    [[ -e $cache_dir/$name ]] && log "$name present but its sha256 is wrong: fetching it again"
    missing+=("$name")
  done
}

list_missing mtx_sha256 missing_mtx
list_missing graph_sha256 missing_graph

if ((${#missing_mtx[@]} == 0 && ${#missing_graph[@]} == 0)); then
  log "all $((${#mtx_sha256[@]} + ${#graph_sha256[@]})) files present in $cache_dir with the right sha256"
  exit 0
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/netsparse-fetch.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/lists/partial" "$scratch/cache/archives/partial" "$scratch/etc/sources.list.d" \
  "$scratch/download" "$scratch/extract"
cat >"$scratch/etc/sources.list" <<EOF
deb [signed-by=$keyring] $mirror bookworm main
deb-src [signed-by=$keyring] $mirror bookworm main
EOF
# Sandbox user root: the scratch directory belongs to whoever runs this, which _apt may not
# be able to write.
cat >"$scratch/apt.conf" <<EOF
Dir::State::Lists "$scratch/lists";
Dir::Cache "$scratch/cache";
Dir::Etc::SourceList "$scratch/etc/sources.list";
Dir::Etc::SourceParts "$scratch/etc/sources.list.d";
APT::Sandbox::User "root";
EOF
export APT_CONFIG=$scratch/apt.conf

log "updating a private package list (bookworm main) in $scratch"
apt-get update -qq -o APT::Sandbox::User=root >"$scratch/update.log" 2>&1 ||
  die "apt-get update failed: $(tail -n 5 "$scratch/update.log")"

if ((${#missing_mtx[@]} > 0)); then
  log "downloading source package suitesparse=$suitesparse_version (about 39 MB)"
  (cd "$scratch/download" &&
    apt-get source -qq --download-only -o APT::Sandbox::User=root \
      "suitesparse=$suitesparse_version") >"$scratch/source.log" 2>&1 ||
    die "apt-get source failed: $(tail -n 5 "$scratch/source.log")"
  [[ -f $scratch/download/$suitesparse_tarball ]] ||
    die "$suitesparse_tarball not downloaded (is suitesparse $suitesparse_version still in the archive?)"
  members=()
  for name in "${missing_mtx[@]}"; do members+=("$suitesparse_prefix/$name"); done
  tar -xJf "$scratch/download/$suitesparse_tarball" -C "$scratch/extract" "${members[@]}" ||
    die "extracting ${missing_mtx[*]} from $suitesparse_tarball failed"
  for name in "${missing_mtx[@]}"; do
    install_checked "$scratch/extract/$suitesparse_prefix/$name" "$name" "${mtx_sha256[$name]}"
  done
fi

if ((${#missing_graph[@]} > 0)); then
  log "downloading binary package libmetis-doc=$metis_doc_version"
  (cd "$scratch/download" &&
    apt-get download -qq -o APT::Sandbox::User=root "libmetis-doc=$metis_doc_version") \
    >"$scratch/download.log" 2>&1 ||
    die "apt-get download failed: $(tail -n 5 "$scratch/download.log")"
  deb=("$scratch"/download/libmetis-doc_*.deb)
  [[ -f ${deb[0]} ]] || die "libmetis-doc .deb not downloaded"
  dpkg -x "${deb[0]}" "$scratch/extract" || die "dpkg -x ${deb[0]} failed"
  for name in "${missing_graph[@]}"; do
    install_checked "$scratch/extract/$metis_doc_prefix/$name" "$name" "${graph_sha256[$name]}"
  done
fi

log "done: $cache_dir"
