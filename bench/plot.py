#!/usr/bin/env python3
"""Figures in the style of the NetSparse paper from netsparse_bench JSON (see bench/sweep.sh).

    python3 bench/plot.py RESULTS_DIR [OUT_DIR]

Reads every *.json in RESULTS_DIR and writes, for the files it finds:
  fig12_speedups.png   speedup of every mode over su, per matrix and K          (paper Fig. 12)
  table8_ablation.png  cumulative ablation RIG -> +filter -> +coalesce -> +concat,
                       speedup over su with the traffic reduction on each bar   (paper Table 8)
  fig15_batch.png      speedup vs RIG batch size, relative to batch 16k         (paper Fig. 15)
  fig17_delay.png      speedup vs concatenation delay, over no concatenation    (paper Fig. 17)
  changing.png         changing sparsity: time per iteration incl. setup
  table7.md            the paper's Table 7 columns for netsparse (K = 16)
  goals.md             issue 5's goals for every run with netsparse, ideal and su
Needs only Debian's python3-matplotlib.
"""
import glob
import json
import math
import os
import re
import sys

try:
    import matplotlib
except ImportError:
    # Debian's python3-matplotlib lives in the system interpreter; another python3 first in PATH
    # (pyenv, a venv) does not see it.
    system = "/usr/bin/python3"
    if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system):
        os.execv(system, [system] + sys.argv)
    raise SystemExit("plot.py needs matplotlib: apt-get install python3-matplotlib")

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODE_ORDER = ["netsparse", "sa-opt", "sa-conveyors", "sa-vanilla", "inspector-executor",
              "su-panel", "su"]
MODE_COLORS = {
    "netsparse": "#c0392b", "sa-opt": "#2980b9", "sa-conveyors": "#7fb3d5",
    "sa-vanilla": "#aed6f1", "inspector-executor": "#27ae60", "su-panel": "#f5b041",
    "su": "#b2babb", "ideal": "#000000",
}
LADDER = ["rig", "rig+filter", "rig+filter+coalesce", "rig+all"]
LADDER_NAMES = {"rig": "RIG", "rig+filter": "+Filter", "rig+filter+coalesce": "+Coalesce",
                "rig+all": "+Concat"}


def load(results_dir):
    runs = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        try:
            with open(path) as f:
                runs[os.path.basename(path)[:-5]] = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            print(f"plot.py: skipping {path}: {e}", file=sys.stderr)
    return runs


def records(run, kernel=None, k=None, mode=None):
    out = []
    for r in run["results"]:
        if kernel is not None and r["kernel"].lower() != kernel.lower():
            continue
        if k is not None and r["K"] != k:
            continue
        if mode is not None and r["mode"] != mode:
            continue
        if r.get("error"):
            continue
        out.append(r)
    return out


def one(run, **kw):
    rs = records(run, **kw)
    return rs[0] if rs else None


def subtitle(run):
    return (f"{run['ranks']} ranks, line rate {run['line_rate'] / 1e9:.1f} GB/s, "
            f"{run['iters']} iterations")


def fig12(runs, out_dir):
    files = {n: r for n, r in runs.items() if n.startswith("fig12_")}
    if not files:
        return None
    groups = []  # (label, {mode: speedup}, ideal speedup)
    for name, run in files.items():
        for kernel in sorted({r["kernel"] for r in run["results"]}):
            for k in sorted({r["K"] for r in run["results"] if r["kernel"] == kernel}):
                sp = {r["mode"]: r["speedup_vs_su"] for r in records(run, kernel=kernel, k=k)}
                label = f"{run['matrix']}\n{kernel} K={k}"
                groups.append((label, sp, sp.get("ideal", 0)))
    modes = [m for m in MODE_ORDER if m != "su" and any(m in g[1] for g in groups)]
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(groups) + 2), 5.4))
    width = 0.8 / max(1, len(modes))
    for i, m in enumerate(modes):
        xs = [g + (i - (len(modes) - 1) / 2) * width for g in range(len(groups))]
        ys = [max(grp[1].get(m, 0), 1e-3) for grp in groups]
        ax.bar(xs, ys, width, label=m, color=MODE_COLORS.get(m), edgecolor="black", linewidth=0.4)
    for g, grp in enumerate(groups):
        if grp[2] > 0:
            ax.hlines(grp[2], g - 0.45, g + 0.45, colors="black", linestyles="dashed",
                      label="ideal (no communication)" if g == 0 else None)
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g[0] for g in groups], fontsize=8)
    ax.set_ylabel("speedup over su (time per iteration)")
    ax.set_title("Speedup over sparsity-unaware (su) per matrix and K\n"
                 + subtitle(next(iter(files.values()))), fontsize=10)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out_dir, "fig12_speedups.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def table8(runs, out_dir):
    files = {n: r for n, r in runs.items() if n.startswith("table8_")}
    if not files:
        return None
    names = sorted(files)
    ks = sorted({r["K"] for n in names for r in files[n]["results"]})
    fig, axes = plt.subplots(len(names), len(ks), figsize=(3.4 * len(ks) + 0.6, 2.9 * len(names)),
                             squeeze=False)
    for row, name in enumerate(names):
        run = files[name]
        for col, k in enumerate(ks):
            ax = axes[row][col]
            ys, labels, traffic = [], [], []
            for m in LADDER:
                r = one(run, k=k, mode=m)
                if r is None:
                    continue
                ys.append(r["speedup_vs_su"])
                traffic.append(r["traffic_vs_su"])
                labels.append(LADDER_NAMES[m])
            bars = ax.bar(range(len(ys)), ys, color="#c0392b", edgecolor="black", linewidth=0.4)
            for b, t in zip(bars, traffic):
                ax.annotate(f"-Trfc {t:.1f}x", (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=7)
            ax.axhline(1.0, color="gray", linewidth=0.8)
            ax.set_xticks(range(len(labels)))
            ax.set_xticklabels(labels, fontsize=8)
            ax.set_title(f"{run['matrix']}, K={k}", fontsize=9)
            ax.set_ylim(0, max(ys + [1.0]) * 1.25)
            if col == 0:
                ax.set_ylabel("speedup over su", fontsize=8)
    fig.suptitle("Cumulative ablation (per-nonzero idx stream): speedup and traffic reduction "
                 "vs su", fontsize=10)
    fig.tight_layout()
    path = os.path.join(out_dir, "table8_ablation.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def sweep(runs, prefix, key_re):
    """{matrix: {key: netsparse time}} for files named PREFIX<matrix>_<key>."""
    series = {}
    for name, run in runs.items():
        if not name.startswith(prefix):
            continue
        m = re.match(prefix + r"(.+)_" + key_re + r"$", name)
        if not m:
            continue
        r = one(run, mode="netsparse")
        if r is None:
            continue
        series.setdefault(run["matrix"], {})[m.group(2)] = r["time_s"]
    return series


def fig15(runs, out_dir):
    series = sweep(runs, "fig15_", r"b(\d+)")
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for matrix, pts in sorted(series.items()):
        base = pts.get("16384")
        if not base:
            continue
        xs = sorted(int(b) for b in pts)
        ax.plot(xs, [base / pts[str(b)] for b in xs], marker="o", label=matrix)
    ax.set_xscale("log", base=2)
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xlabel("RIG batch size (idxs per work request)")
    ax.set_ylabel("speedup over batch 16k")
    ax.set_title("Sensitivity to the RIG batch size (netsparse, K=16)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out_dir, "fig15_batch.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def fig17(runs, out_dir):
    series = sweep(runs, "fig17_", r"d(\d+)")
    nocat = {}
    for name, run in runs.items():
        if name.startswith("fig17_") and name.endswith("_nocat"):
            r = one(run, mode="netsparse")
            if r is not None:
                nocat[run["matrix"]] = r["time_s"]
    if not series or not nocat:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for matrix, pts in sorted(series.items()):
        if matrix not in nocat:
            continue
        xs = sorted(int(d) for d in pts)
        ax.plot(xs, [nocat[matrix] / pts[str(d)] for d in xs], marker="o", label=matrix)
    ax.set_xscale("symlog", linthresh=100)
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xlabel("concatenation delay (ns)")
    ax.set_ylabel("speedup over no concatenation")
    ax.set_title("Sensitivity to the concatenation delay (netsparse, per-nonzero idxs, K=16)",
                 fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out_dir, "fig17_delay.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def changing(runs, out_dir):
    files = {n: r for n, r in runs.items() if n.startswith("changing_")}
    if not files:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4))
    names = sorted(files)
    modes = [m for m in MODE_ORDER if any(one(files[n], mode=m) for n in names)]
    width = 0.8 / max(1, len(modes))
    for i, m in enumerate(modes):
        xs = [g + (i - (len(modes) - 1) / 2) * width for g in range(len(names))]
        total, setup = [], []
        for n in names:
            r = one(files[n], mode=m)
            total.append(1e3 * r["time_s"] if r else 0)
            setup.append(1e3 * r["setup_s"] if r else 0)
        ax.bar(xs, total, width, label=m, color=MODE_COLORS.get(m), edgecolor="black",
               linewidth=0.4)
        ax.bar(xs, setup, width, color="none", edgecolor="black", hatch="//", linewidth=0.4)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([files[n]["matrix"] for n in names], fontsize=8)
    ax.set_ylabel("ms per iteration (hatched: setup)")
    ax.set_title("Changing sparsity: a new pattern every iteration", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out_dir, "changing.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def table7(runs, out_dir):
    rows = []
    for name, run in sorted(runs.items()):
        if not name.startswith("fig12_"):
            continue
        r = one(run, kernel="spmm", k=16, mode="netsparse")
        if r is None:
            continue
        sa = one(run, kernel="spmm", k=16, mode="sa-opt")
        pct = lambda v: "-" if v is None or v < 0 else f"{100 * v:.0f}%"  # noqa: E731
        rows.append(f"| {run['matrix']} | {pct(r['fc_rate'])} | {r['prs_per_packet']:.1f} | "
                    f"{pct(r['goodput'])} | {pct(r['line_util'])} | {r['traffic_vs_su']:.1f}x | "
                    f"{pct(sa['goodput']) if sa else '-'} | {r['prs_vs_sa']:.1f}x |")
    if not rows:
        return None
    text = ("| matrix | F+C rate | PRs/packet | goodput | line util. | traffic vs SU | "
            "goodput sa-opt | PRs vs SA |\n|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)
            + "\n")
    path = os.path.join(out_dir, "table7.md")
    with open(path, "w") as f:
        f.write(text)
    return path


def goals(runs, out_dir):
    """The issue-5 goals for every (file, kernel, K) that ran netsparse beside ideal and su."""
    lines = []
    for name, run in sorted(runs.items()):
        for kernel in sorted({r["kernel"] for r in run["results"]}):
            for k in sorted({r["K"] for r in run["results"] if r["kernel"] == kernel}):
                rs = {r["mode"]: r for r in records(run, kernel=kernel, k=k)}
                ns, ideal, su = rs.get("netsparse"), rs.get("ideal"), rs.get("su")
                if not (ns and ideal and su):
                    continue
                bound = max(ideal["time_s"], ns["min_wire_tail"] / run["line_rate"])
                others = {m: r["time_s"] for m, r in rs.items()
                          if m not in ("netsparse", "ideal") and m not in LADDER}
                best_mode = min(others, key=others.get)
                sparse_enough = ns["min_wire_total"] < 0.5 * su["bytes_total"]
                ratio_best = others[best_mode] / ns["time_s"]
                if sparse_enough:
                    verdict = "met" if ratio_best > 1 else f"missed ({ratio_best:.2f}x)"
                else:
                    verdict = "met" if ratio_best >= 1 / 1.1 else f"missed ({ratio_best:.2f}x)"
                ie = rs.get("inspector-executor")
                changing = ""
                if run.get("changing_sparsity") and ie:
                    changing = f"{ie['time_s'] / ns['time_s']:.2f}x"
                    own_ie = ie.get("time_without_shared_setup_s", 0)
                    own_ns = ns.get("time_without_shared_setup_s", 0)
                    if own_ie > 0 and own_ns > 0:
                        changing += f" ({own_ie / own_ns:.2f}x without the shared re-tiling)"
                lines.append(
                    f"| {name} | {run['matrix']} | {run['ranks']} | {kernel} | {k} | "
                    f"{ns['bytes_total'] / max(ns['min_wire_total'], 1):.3f} | "
                    f"{ns['traffic_vs_su']:.1f}x | {ns['time_s'] / bound:.2f} | "
                    f"{'yes' if sparse_enough else 'no'} | {best_mode} {ratio_best:.2f}x | "
                    f"{verdict} | {changing} |")
    if not lines:
        return None
    text = ("| run | matrix | P | kernel | K | bytes / minimum (goal <= 1.10) | traffic vs su | "
            "time / max(ideal, min bytes / line rate) (goal <= 1.3) | min bytes < su / 2 | "
            "best other mode: its time / netsparse's | speed goal | changing sparsity: IE / "
            "netsparse (goal >= 2) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(lines) + "\n")
    path = os.path.join(out_dir, "goals.md")
    with open(path, "w") as f:
        f.write(text)
    return path


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    results_dir = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else results_dir
    os.makedirs(out_dir, exist_ok=True)
    runs = load(results_dir)
    if not runs:
        print(f"plot.py: no JSON files in {results_dir}", file=sys.stderr)
        return 1
    made = [p for p in (fig12(runs, out_dir), table8(runs, out_dir), fig15(runs, out_dir),
                        fig17(runs, out_dir), changing(runs, out_dir), table7(runs, out_dir),
                        goals(runs, out_dir)) if p]
    for p in made:
        print(p)
    return 0 if made else 1


if __name__ == "__main__":
    sys.exit(main())
