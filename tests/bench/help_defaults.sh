#!/usr/bin/env bash
# netsparse_bench --help states the engine defaults of the configuration table (netsparse_info
# prints the table): each knob's "(engine default N)" must be the attribute's default, and no
# {placeholder} may be left. Usage: help_defaults.sh NETSPARSE_BENCH NETSPARSE_INFO
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
((fail == 0)) && echo "help defaults: PASS"
exit "$fail"
