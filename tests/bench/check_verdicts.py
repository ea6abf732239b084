#!/usr/bin/env python3
"""netsparse_bench's intervals and verdicts, end to end (no timing is judged).

  check_verdicts.py COMMAND...   runs COMMAND (an mpirun of netsparse_bench) with "--json RUN.json"
                                 appended, then checks RUN.json and the printed verdict lines

Per mode: time_s is the median of times_s and lies within time_ci95_s and time_iqr_s. Per verdict
(the JSON's "verdicts"): "too few samples" below 6 iterations per mode (time to solution: or below
3 rounds), else "faster" exactly when the ratio's interval lies below 1, "slower" when above, else
"within noise" with noise_pct the interval's farthest reach from 1; the per-iteration verdict is
against the baseline with the smallest median and its ratio is the ratio of the medians; the
printed lines say the same as the JSON. Prints "verdicts check: PASS" or the failures.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

MIN_ITERATIONS, MIN_ROUNDS = 6, 3


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def check(doc, out, failures):
    def fail(msg):
        failures.append(msg)

    rounds = doc["rounds"]
    results = {}
    for r in doc["results"]:
        if r["error"]:
            continue
        results[(r["kernel"], r["K"], r["mode"])] = r
        t, times = r["time_s"], r["times_s"]
        lo, hi = r["time_ci95_s"]
        q1, q3 = r["time_iqr_s"]
        if not close(t, statistics.median(times)):
            fail(f"{r['mode']} K={r['K']}: time_s {t} is not the median of times_s")
        if not (lo <= t <= hi):
            fail(f"{r['mode']} K={r['K']}: time_ci95_s [{lo}, {hi}] does not contain {t}")
        if not (q1 <= t <= q3):
            fail(f"{r['mode']} K={r['K']}: time_iqr_s [{q1}, {q3}] does not contain {t}")
    if not doc["verdicts"]:
        fail("no verdicts")
    for v in doc["verdicts"]:
        name = f"{v['what']} K={v['K']} {v['mode']} against {v['against']}"
        lo, hi = v["ratio_ci95"]
        enough = min(v["samples"]) >= MIN_ITERATIONS
        if v["what"].startswith("time_to_solution"):
            enough = enough and rounds >= MIN_ROUNDS
        if not lo <= hi:
            fail(f"{name}: interval [{lo}, {hi}]")
        if not enough:
            expected = "too few samples"
        elif hi < 1:
            expected = "faster"
        elif lo > 1:
            expected = "slower"
        else:
            expected = "within noise"
        if v["verdict"] != expected:
            fail(f"{name}: verdict '{v['verdict']}', the interval [{lo:.4f}, {hi:.4f}] "
                 f"({'enough' if enough else 'too few'} samples) says '{expected}'")
        if expected == "within noise" and not close(v["noise_pct"], 100 * max(hi - 1, 1 - lo)):
            fail(f"{name}: noise_pct {v['noise_pct']} for [{lo}, {hi}]")
        if v["what"] == "time_per_iteration":
            mine = results[(v["kernel"], v["K"], v["mode"])]
            baselines = [r for (k, kk, m), r in results.items()
                         if k == v["kernel"] and kk == v["K"] and not m.startswith("netsparse")
                         and m != "ideal"]
            best = min(baselines, key=lambda r: statistics.median(r["times_s"]))
            if v["against"] != best["mode"]:
                fail(f"{name}: the best other mode is {best['mode']}")
            ratio = statistics.median(mine["times_s"]) / statistics.median(best["times_s"])
            if not close(v["ratio"], ratio):
                fail(f"{name}: ratio {v['ratio']}, the medians give {ratio}")
            if v["verdict"] == "within noise":
                words = f"within noise (±{v['noise_pct']:.1f} %) of the best other mode"
            elif v["verdict"] == "too few samples":
                words = "not resolved (too few samples) against the best other mode"
            else:
                words = f"x {v['verdict']} ("
            line = [l for l in out.splitlines() if l.strip().startswith("netsparse is ")]
            if not any(words in l for l in line):
                fail(f"{name}: no printed line says '{words}': {line}")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.json")
        run = subprocess.run(argv[1:] + ["--json", path], capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout, run.stderr)
            print(f"verdicts check: FAIL (netsparse_bench exited {run.returncode})")
            return 1
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    failures = []
    check(doc, run.stdout, failures)
    for f in failures:
        print("FAIL:", f)
    print(f"{len(doc['results'])} records, {len(doc['verdicts'])} verdicts: "
          + ", ".join(f"{v['what']} {v['verdict']}" for v in doc["verdicts"]))
    print("verdicts check:", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
