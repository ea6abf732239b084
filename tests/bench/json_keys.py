#!/usr/bin/env python3
"""The key set of a benchmark's JSON output, to check that a run still writes every field.

  json_keys.py record RUN.json              prints one "path<TAB>type" line per key path
  json_keys.py check KEYS.txt RUN.json      exit 0 if every recorded (path, type) is in RUN.json

A path names object keys from the root joined by '.', with '[]' for "any element of an array"
(the union over the elements), e.g. results[].engine_stats.config.client_units. Types are JSON's:
object, array, string, number (integer and fractional alike: a writer may print 0 or 0.0 for the
same double), boolean, null. A path recorded with two types (a field that is null in some records)
must show both again. New keys are allowed: the check is that nothing a reader relies on went
away or changed its type.
"""
import json
import sys


def json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def key_paths(value, path, out):
    out.add((path, json_type(value)))
    if isinstance(value, dict):
        for k, v in value.items():
            key_paths(v, f"{path}.{k}" if path else k, out)
    elif isinstance(value, list):
        for v in value:
            key_paths(v, f"{path}[]", out)


def load_paths(json_file):
    with open(json_file, encoding="utf-8") as f:
        doc = json.load(f)
    out = set()
    key_paths(doc, "", out)
    out.discard(("", "object"))
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "record":
        for path, kind in sorted(load_paths(argv[2])):
            print(f"{path}\t{kind}")
        return 0
    if len(argv) == 4 and argv[1] == "check":
        with open(argv[2], encoding="utf-8") as f:
            recorded = {tuple(line.rstrip("\n").split("\t")) for line in f
                        if line.strip() and not line.startswith("#")}
        have = load_paths(argv[3])
        missing = sorted(recorded - have)
        for path, kind in missing:
            others = sorted(k for p, k in have if p == path)
            now = "absent" if not others else "now " + "|".join(others)
            print(f"missing: {path} ({kind}; {now})")
        print(f"{argv[3]}: {len(recorded) - len(missing)} of {len(recorded)} recorded key paths "
              f"present with their type, {len(have - recorded)} new")
        return 1 if missing else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
