#!/usr/bin/env bash
# check_json_keys.sh KEYS.txt COMMAND...
# Runs COMMAND (an mpirun of a benchmark) with "--json RUN.json" appended (RUN.json in a fresh
# temporary directory), then checks with json_keys.py that RUN.json still has every key path of
# KEYS.txt with its JSON type (the fields recorded before the benchmark was rewritten).
set -uo pipefail
keys=$1
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$("$@" --json "$dir/run.json" 2>&1)
rc=$?
if [[ $rc != 0 ]]; then
  echo "FAIL: the benchmark exited with $rc"
  printf '%s\n' "$out"
  exit 1
fi
python3 "$(dirname "$0")/json_keys.py" check "$keys" "$dir/run.json"
