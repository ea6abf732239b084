#!/usr/bin/env python3
"""The ASan stage leaves out the tests labelled np_repeat (a multi-rank case rerun at another
process count, tests/CMakeLists.txt); it must still run every program they run.

    np_repeat_covered.py CTEST BUILD_DIR

Asks ctest for the build's tests (ctest --show-only=json-v1) and fails, naming them, when a
program of the build tree that an np_repeat test of a `sanitize` directory runs is run by no other
`sanitize` test. Prints what it checked, so a pass says something.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def programs(test, build):
    """The build tree's executables in the test's command line."""
    out = set()
    for arg in test.get("command", []):
        # `cmake -DEMULATE=/path/prog -P script.cmake`: the programs a script runs.
        if arg.startswith("-D") and "=" in arg:
            arg = arg.split("=", 1)[1]
        path = os.path.realpath(arg) if os.path.isabs(arg) else None
        if path and path.startswith(build + os.sep) and os.path.isfile(path):
            out.add(os.path.relpath(path, build))
    return out


def labels(test):
    for p in test.get("properties", []):
        if p.get("name") == "LABELS":
            return set(p.get("value", []))
    return set()


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ctest, build = sys.argv[1], os.path.realpath(sys.argv[2])
    # ctest rewrites <dir>/Testing/Temporary/LastTest.log even for --show-only, and this check
    # runs inside a ctest run of the same tree: ask about a copy of the test files instead.
    with tempfile.TemporaryDirectory() as tmp:
        for dirpath, _, files in os.walk(build):
            if "CTestTestfile.cmake" in files:
                dest = os.path.join(tmp, os.path.relpath(dirpath, build))
                os.makedirs(dest, exist_ok=True)
                shutil.copy(os.path.join(dirpath, "CTestTestfile.cmake"), dest)
        info = json.loads(subprocess.run([ctest, "--test-dir", tmp, "--show-only=json-v1"],
                                         check=True, capture_output=True, text=True).stdout)
    kept, repeats = set(), []
    for t in info["tests"]:
        lab = labels(t)
        if "sanitize" not in lab:
            continue
        if "np_repeat" in lab:
            repeats.append(t)
        else:
            kept |= programs(t, build)
    missing = []
    for t in repeats:
        progs = programs(t, build)
        if not progs:
            missing.append(f"{t['name']}: no program of the build tree found in its command")
        for p in sorted(progs - kept):
            missing.append(f"{t['name']}: {p} runs in no other sanitize test")
    print(f"np_repeat: {len(repeats)} tests left out of the ASan stage; "
          f"{len(kept)} programs run by the other sanitize tests")
    for m in missing:
        print(f"np_repeat: NOT COVERED {m}")
    if not repeats:
        print("np_repeat: no test labelled np_repeat (the check saw nothing)")
        return 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
