#!/usr/bin/env python3
"""What a ctest run did, from ctest's own records (scripts/test-all.sh calls it after each stage).

    ctest-report.py BUILD_DIR JUNIT_XML [N]      (BUILD_DIR: kept for the call's shape)

Reads the JUnit file the run wrote (ctest --output-junit: every test's name, status, time and
output; run_ctest passes --test-output-size-passed so that passed tests keep their whole output;
LastTest.log is not used: any other ctest call on the same tree, even `ctest -N`, rewrites it),
and prints
  - the counts: ctest tests run / passed / failed / not run, GoogleTest cases passed (the sum of
    the "[  PASSED  ] N tests" lines: each gtest_discover_tests entry is one case, each mpirun
    suite prints its rank 0's total) and verdict lines passed (the "<name>: PASS" lines of the
    programs that judge themselves: kill tests, disagreement cases, soak checks, ...);
  - the N slowest tests (default 20) with their times.
Nothing is kept by hand: the times are ctest's, measured in this run.
"""
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    junit = Path(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    if not junit.is_file():
        print(f"ctest-report: no JUnit file {junit} (did ctest run?)")
        return 1
    cases = []
    gtest = verdicts = 0
    for tc in ET.parse(junit).getroot().iter("testcase"):
        cases.append((tc.get("name", "?"), float(tc.get("time", "0") or 0), tc.get("status", "?")))
        out = tc.find("system-out")
        # Without colour codes (a program under mpirun may colour its GoogleTest report; ctest
        # writes the escape character as [NON-XML-CHAR-0x1B]).
        text = re.sub(r"(\x1b|\[NON-XML-CHAR-0x1B\])\[[0-9;]*m", "",
                      out.text if out is not None and out.text else "")
        gtest += sum(int(m) for m in re.findall(r"^\[  PASSED  \] (\d+) tests?\.", text, re.M))
        # "<name>: PASS" at a line start or after a rank prefix (not gtest's "[  PASSED  ]").
        verdicts += len(re.findall(r"^(?:\[rank \d+\] )?[A-Za-z_][\w .-]*: PASS\b", text, re.M))
    status = {}
    for _, _, s in cases:
        status[s] = status.get(s, 0) + 1
    total = sum(t for _, t, _ in cases)
    print(f"ctest-report: {len(cases)} tests: "
          + ", ".join(f"{k} {v}" for k, v in sorted(status.items()))
          + f"; {gtest} GoogleTest cases passed; {verdicts} verdict lines PASS;"
          + f" {total:.1f} s of test time")
    print(f"ctest-report: the {min(n, len(cases))} slowest tests (s):")
    for name, t, s in sorted(cases, key=lambda c: -c[1])[:n]:
        print(f"  {t:8.2f}  {name}" + ("" if s == "run" else f"  [{s}]"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
