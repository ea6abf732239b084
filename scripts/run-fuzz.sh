#!/usr/bin/env bash
# Bounded libFuzzer run of one NetSparse fuzz target under ASan + UBSan.
#   scripts/run-fuzz.sh [SECONDS] [TARGET]   SECONDS: default 30, at most 60
#                                            TARGET: decoder (default), concat_point,
#                                                    sparse_packet, matrix_market or metis
# Configures a separate clang build (build-fuzz, or $NETSPARSE_FUZZ_BUILD_DIR) with
# -DNETSPARSE_FUZZ=ON, builds only that fuzz target (and, for the decoder, its seed writer),
# seeds a fresh corpus (valid packets for the decoder; the readers' test fixtures, valid,
# malformed and gzip-compressed, for matrix_market and metis, with a dictionary of their
# grammar's words), and fuzzes. Exits non-zero on any crash, sanitizer report or build error.
set -euo pipefail

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1 || seconds > 60)); then
  echo "run-fuzz: SECONDS must be an integer in [1, 60], got '$seconds'" >&2
  exit 2
fi
target="${2:-decoder}"
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

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNETSPARSE_FUZZ=ON -DNETSPARSE_BUILD_BENCH=OFF -DNETSPARSE_BUILD_EXAMPLES=OFF >/dev/null
corpus="$build/fuzz-corpus-$target"
artifacts="$build/fuzz-artifacts-$target"
rm -rf "$corpus" "$artifacts"
mkdir -p "$corpus" "$artifacts"
extra=()
case "$target" in
  decoder)
    ninja -C "$build" -j"$jobs" fuzz_decoder fuzz_seed_writer
    "$build/tests/fuzz/fuzz_seed_writer" "$corpus"
    ;;
  concat_point)
    ninja -C "$build" -j"$jobs" fuzz_concat_point  # op streams: an empty corpus is a fine start
    ;;
  sparse_packet)
    ninja -C "$build" -j"$jobs" fuzz_sparse_packet
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
    ninja -C "$build" -j"$jobs" "fuzz_$target"
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
