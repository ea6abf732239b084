#!/usr/bin/env bash
# netsparse_bench --help states the engine defaults of the configuration table (netsparse_info
# prints the table): each knob's "(engine default N)" must be the attribute's default, and no
# {placeholder} may be left; and the environment's values in effect (the stall limit, the
# transport) with and without the variables set. Usage: help_defaults.sh NETSPARSE_BENCH NETSPARSE_INFO
set -uo pipefail
bench=$1 info=$2
help=$("$bench" --help) || { echo "FAIL: --help exited $?"; exit 1; }
table=$("$info") || true  # exit 1 only reports a bad value; the attribute lines are printed
fail=0
if grep -q '{[a-z_]*}' <<<"$help"; then
  echo "FAIL: a placeholder is left: $(grep -o '{[a-z_]*}' <<<"$help" | head -1)"
  fail=1
fi
# option -> attribute
for pair in --delay-ns:concat_delay_ns --packet-bytes:packet_bytes --client-units:num_client_units \
  --server-units:num_server_units --pending:pending_entries --idx-chunk:idx_chunk; do
  option=${pair%%:*} attribute=${pair#*:}
  want=$(awk -v a="$attribute" '$1 == a { print $4; exit }' <<<"$table")
  line=$(grep -- "^  $option " <<<"$help")
  if [[ -z $want || $line != *"(engine default $want)"* ]]; then
    echo "FAIL: $option: help says '$line', the table's $attribute default is '$want'"
    fail=1
  fi
done
# The environment's values in effect: the stall limit and the transport NETSPARSE_* sets, and
# the defaults when they are unset.
if ! grep -q 'no progress for 120 s (NETSPARSE_BENCH_STALL_S, default)' <<<"$help" ||
  ! grep -q 'NETSPARSE_TRANSPORT if set$' <<<"$help" ||
  ! grep -q '^ *(it is not set), else verbs' <<<"$help"; then
  echo "FAIL: without the variables, --help does not show the defaults in effect"
  fail=1
fi
set_help=$(NETSPARSE_BENCH_STALL_S=77 NETSPARSE_TRANSPORT=mpi "$bench" --help)
if ! grep -q 'no progress for 77 s (NETSPARSE_BENCH_STALL_S is set)' <<<"$set_help" ||
  ! grep -q '^ *(now mpi), else verbs' <<<"$set_help"; then
  echo "FAIL: with NETSPARSE_BENCH_STALL_S=77 NETSPARSE_TRANSPORT=mpi, --help says:"
  grep -E 'no progress for|now |not set' <<<"$set_help"
  fail=1
fi
if ! grep -q "the engine's watchdog, $(awk '$1 == "watchdog_ms" { print $4; exit }' <<<"$table") ms" \
  <<<"$help"; then
  echo "FAIL: the watchdog in --help is not the table's watchdog_ms default"
  fail=1
fi
((fail == 0)) && echo "help defaults: PASS"
exit "$fail"
