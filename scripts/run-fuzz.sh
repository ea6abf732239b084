#!/usr/bin/env bash
# Bounded libFuzzer run of one NetSparse fuzz target under ASan + UBSan.
#   scripts/run-fuzz.sh [SECONDS] [TARGET]   SECONDS: default 30, at most 60
#                                            TARGET: decoder (default), concat_point,
#                                                    sparse_packet, matrix_market or metis
#   scripts/run-fuzz.sh --build              configures and builds every fuzz target, once
# With NETSPARSE_FUZZ_PREBUILT=1 a run skips its configure and build (after --build), so that
# several targets can fuzz at once from one build directory (the test script runs two at a time,
# one per core).
# Configures a separate clang build (build-fuzz, or $NETSPARSE_FUZZ_BUILD_DIR) with
# -DNETSPARSE_FUZZ=ON, builds only that fuzz target (and, for the decoder, its seed writer),
# seeds a fresh corpus (valid packets for the decoder; the readers' test fixtures, valid,
# malformed and gzip-compressed, for matrix_market and metis, with a dictionary of their
# grammar's words), and fuzzes. Exits non-zero on any crash, sanitizer report or build error.
set -euo pipefail

all_targets=(decoder concat_point sparse_packet matrix_market metis)
if [[ ${1:-} == --build ]]; then
  build_only=1
  seconds=1
  target=decoder
else
  build_only=0
  seconds="${1:-30}"
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1 || seconds > 60)); then
  echo "run-fuzz: SECONDS must be an integer in [1, 60], got '$seconds'" >&2
  exit 2
fi
((build_only)) || target="${2:-decoder}"
case "$target" in
  decoder | concat_point | sparse_packet | matrix_market | metis) ;;
  *)
    echo "run-fuzz: TARGET must be decoder, concat_point, sparse_packet, matrix_market or metis," \
      "got '$target'" >&2
    exit 2
    ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${NETSPARSE_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${NETSPARSE_JOBS:-2}"

for tool in clang clang++ cmake ninja; do
  command -v "$tool" >/dev/null || { echo "run-fuzz: '$tool' not found" >&2; exit 2; }
done

prebuilt=${NETSPARSE_FUZZ_PREBUILT:-0}
if [[ $prebuilt != 1 ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DNETSPARSE_FUZZ=ON -DNETSPARSE_BUILD_BENCH=OFF -DNETSPARSE_BUILD_EXAMPLES=OFF >/dev/null
fi
build_targets() {  # build_targets TARGET...: unless prebuilt, when each must exist already
  if [[ $prebuilt != 1 ]]; then
    ninja -C "$build" -j"$jobs" "$@"
    return
  fi
  for t in "$@"; do
    [[ -x $build/tests/fuzz/$t ]] ||
      { echo "run-fuzz: NETSPARSE_FUZZ_PREBUILT=1 but $build/tests/fuzz/$t is not built" >&2; exit 2; }
  done
}
if ((build_only)); then
  build_targets "${all_targets[@]/#/fuzz_}" fuzz_seed_writer
  echo "run-fuzz: built ${all_targets[*]} in $build"
  exit 0
fi
corpus="$build/fuzz-corpus-$target"
artifacts="$build/fuzz-artifacts-$target"
rm -rf "$corpus" "$artifacts"
mkdir -p "$corpus" "$artifacts"
extra=()
case "$target" in
  decoder)
    build_targets fuzz_decoder fuzz_seed_writer
    "$build/tests/fuzz/fuzz_seed_writer" "$corpus"
    ;;
  concat_point)
    build_targets fuzz_concat_point  # op streams: an empty corpus is a fine start
    ;;
  sparse_packet)
    build_targets fuzz_sparse_packet
    # Seeds: a layout (4-byte values, n = 1000, span 300) and one valid packet of each encoding.
    printf '\x02\xe8\x03\x00\x00\x00\x00\x00\x00\x2c\x01\x00\x00' >"$corpus/layout"
    { cat "$corpus/layout"
      printf '\x04\x01\x00\x00\x07\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00'
      printf '\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
      printf '\x05\x00\x00\x00\x2a\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40'
    } >"$corpus/sparse"
    { cat "$corpus/layout"
      printf '\x05\x03\x00\x00\x07\x00\x00\x00\x03\x00\x00\x00\x02\x00\x00\x00'
      printf '\x00\x00\x00\x00\x01\x00\x00\x00\x62\x00\x00\x00\x00\x00\x00\x00'
      printf '\x00\x00\x80\x3f\x00\x00\x00\x40'
    } >"$corpus/dense"
    ;;
  matrix_market | metis)
    build_targets "fuzz_$target"
    data="$root/tests/data/$([[ $target == metis ]] && echo metis || echo mm)"
    n=0
    while IFS= read -r -d '' f; do
      cp "$f" "$corpus/seed-$n-$(basename "$f")"
      n=$((n + 1))
    done < <(find "$data" -type f -size -4096c -print0)
    echo "run-fuzz: seeded $n files from ${data#"$root"/}"
    extra=(-dict="$root/tests/fuzz/$target.dict")
    ;;
esac

export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
# libFuzzer exits non-zero on a crash, a sanitizer report, a leak or a timeout of one input.
"$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -max_len=4096 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "${extra[@]}" "$corpus"
echo "run-fuzz: fuzz_$target ran ${seconds}s, no crash"
