#!/usr/bin/env python3
"""netsparse_bench's intervals and verdicts, end to end (no timing is judged).

  check_verdicts.py [--plot PLOT_PY] [--expect-unresolved] COMMAND...
      runs COMMAND (an mpirun of netsparse_bench) with "--json RUN.json" appended, then checks
      RUN.json and the printed verdict lines; with --plot, also bench/plot.py's goals.md and
      fig12_speedups.png drawn from RUN.json; with --expect-unresolved (a run whose --max-time
      stops every round after one iteration), every mode's rounds ran one iteration each and
      every verdict is "too few samples"

Per mode: time_s is the median of times_s and lies within time_ci95_s and time_iqr_s. Per verdict
(the JSON's "verdicts"): "too few samples" below 6 iterations per mode (time to solution: or below
3 rounds), else "faster" exactly when the ratio's interval lies below 1, "slower" when above, else
"within noise" with noise_pct the interval's farthest reach from 1; the per-iteration verdict is
against the baseline with the smallest median and its ratio is the ratio of the medians; the
printed lines say the same as the JSON. Per mode, round_iterations says how many of times_s
each round ran: up to max_iters (--min-time), fewer than iters only once max_time_s was spent,
none after it; speedup_vs_su lies within speedup_vs_su_ci95.
goals.md's speed goal follows the per-iteration verdict's interval. Prints "verdicts check: PASS"
or the failures.
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
        most = doc.get("max_iters", doc["iters"])
        per_round = r.get("round_iterations", [])
        if len(per_round) != rounds or sum(per_round) != len(times) or \
                not all(1 <= n <= most for n in per_round):
            fail(f"{r['mode']} K={r['K']}: round_iterations {per_round} for {len(times)} "
                 f"timed iterations, {rounds} rounds of 1 to {most}")
        at = 0
        limit = doc.get("max_time_s", 0)
        for n in per_round:  # fewer than --iters only once --max-time was spent, never past it
            spent, before_last = sum(times[at:at + n]), sum(times[at:at + n - 1])
            if n < doc["iters"] and not 0 < limit <= spent:
                fail(f"{r['mode']} K={r['K']}: a round of {n} < {doc['iters']} iterations "
                     f"took {spent:.6f} s (--max-time {limit})")
            if n > 1 and 0 < limit <= before_last:
                fail(f"{r['mode']} K={r['K']}: a round went on after {before_last:.6f} s "
                     f"(--max-time {limit})")
            at += n
        if "speedup_vs_su_ci95" in r:
            lo, hi = r["speedup_vs_su_ci95"]
            if not (lo <= r["speedup_vs_su"] * (1 + 1e-9) and r["speedup_vs_su"] <= hi * (1 + 1e-9)):
                fail(f"{r['mode']} K={r['K']}: speedup_vs_su {r['speedup_vs_su']} outside "
                     f"speedup_vs_su_ci95 [{lo}, {hi}]")
        elif any(x["mode"] == "su" and x["K"] == r["K"] and not x["error"]
                 for x in doc["results"]):
            fail(f"{r['mode']} K={r['K']}: no speedup_vs_su_ci95 beside su")
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


def check_plot(plot, path, doc, tmp, failures):
    """plot.py on the run: fig12 drawn, goals.md's speed goal as the verdict's interval says."""
    out = os.path.join(tmp, "figures")
    drawn = subprocess.run([sys.executable, plot, "-o", out, path], capture_output=True,
                           text=True)
    if drawn.returncode != 0:
        failures.append(f"plot.py exited {drawn.returncode}: {drawn.stdout} {drawn.stderr}")
        return
    if not os.path.exists(os.path.join(out, "fig12_speedups.png")):
        failures.append(f"plot.py drew no fig12_speedups.png: {drawn.stdout}")
    with open(os.path.join(out, "goals.md"), encoding="utf-8") as f:
        rows = [l for l in f if l.startswith("| ") and "run.json" in l]
    for v in doc["verdicts"]:
        if v["what"] != "time_per_iteration":
            continue
        row = [r for r in rows if f"| {v['kernel']} | {v['K']} |" in r]
        if len(row) != 1:
            failures.append(f"goals.md: {len(row)} rows for {v['kernel']} K={v['K']}")
            continue
        goal = row[0].split("|")[-3].strip()
        sparse_enough = row[0].split("|")[-5].strip() == "yes"
        lo, hi = v["ratio_ci95"]
        bound = 1.0 if sparse_enough else 1.1
        if v["verdict"] == "too few samples":
            want = "not resolved"
        elif hi < bound:
            want = "met"
        elif lo > bound:
            want = "missed"
        else:
            want = "within noise"
        if not goal.startswith(want) or "(medians)" in goal:
            failures.append(f"goals.md K={v['K']}: speed goal '{goal}', the interval "
                            f"[{lo:.4f}, {hi:.4f}] against {bound} says '{want}'")


def main(argv):
    args = argv[1:]
    plot, unresolved = None, False
    while args[:1] in (["--plot"], ["--expect-unresolved"]):
        if args[0] == "--plot":
            plot, args = args[1], args[2:]
        else:
            unresolved, args = True, args[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.json")
        run = subprocess.run(args + ["--json", path], capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout, run.stderr)
            print(f"verdicts check: FAIL (netsparse_bench exited {run.returncode})")
            return 1
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if plot:
            check_plot(plot, path, doc, tmp, failures)
    check(doc, run.stdout, failures)
    if unresolved:
        for r in doc["results"]:
            if r["round_iterations"] != [1] * doc["rounds"]:
                failures.append(f"{r['mode']}: round_iterations {r['round_iterations']}, "
                                f"expected one per round")
        for v in doc["verdicts"]:
            if v["verdict"] != "too few samples":
                failures.append(f"{v['what']} K={v['K']}: '{v['verdict']}' from "
                                f"{v['samples']} samples")
        if "not resolved (too few samples) against the best other mode" not in run.stdout:
            failures.append("no printed line says 'not resolved'")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(doc['results'])} records, {len(doc['verdicts'])} verdicts: "
          + ", ".join(f"{v['what']} {v['verdict']}" for v in doc["verdicts"]))
    print("verdicts check:", "FAIL" if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
