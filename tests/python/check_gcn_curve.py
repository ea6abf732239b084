"""The PyTorch GCN (examples/gcn_train.py) against the C++ example (examples/gcn_train.cpp): the
same model, data and sampling, so the loss per epoch must agree within float32 rounding.

    check_gcn_curve.py --mpirun "mpirun --oversubscribe -np 2" --cpp build/examples/gcn_train \
                       --py examples/gcn_train.py --python /usr/bin/python3 [--tolerance 1e-4]

Runs both (same arguments), prints both curves and the largest relative difference, and exits 1
when it exceeds the tolerance, when a curve is missing or of the wrong length, or when the loss
does not fall (a curve that agrees but does not train would hide a broken gradient)."""

import argparse
import re
import shlex
import subprocess
import sys


def run(cmd):
    print("$", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print(p.stdout, p.stderr, sep="\n")
        sys.exit(f"exit status {p.returncode}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--cpp", required=True)
    ap.add_argument("--py", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--matrix", default="gen:kron:10")
    o = ap.parse_args()
    common = ["--matrix", o.matrix, "--epochs", str(o.epochs)]
    mpirun = shlex.split(o.mpirun)
    cpp_out = run(mpirun + [o.cpp] + common)
    py_out = run(mpirun + [o.python, "-m", "mpi4py", o.py] + common)
    # C++: the "loss per epoch" table ("  <epoch>  <loss>"); Python: "epoch E loss L".
    table = cpp_out.split("loss per epoch:", 1)[-1]
    cpp = [float(m.group(2)) for m in re.finditer(r"^\s+(\d+)\s+([0-9.]+)\s*$", table, re.M)]
    py = [float(m.group(1)) for m in re.finditer(r"^epoch \d+ loss ([0-9.]+)$", py_out, re.M)]
    print(f"{'epoch':>5} {'C++':>12} {'PyTorch':>12} {'rel. diff':>10}")
    worst = 0.0
    for e, (c, p) in enumerate(zip(cpp, py)):
        d = abs(c - p) / abs(c)
        worst = max(worst, d)
        print(f"{e:5d} {c:12.7f} {p:12.7f} {d:10.2e}")
    for line in py_out.splitlines() + cpp_out.splitlines():
        if "time per epoch" in line or line.strip().startswith("netsparse "):
            print(line)
    if len(cpp) != o.epochs or len(py) != o.epochs:
        sys.exit(f"FAILED: expected {o.epochs} epochs, got {len(cpp)} (C++) and {len(py)} (Python)")
    if not py[-1] < 0.8 * py[0]:
        sys.exit(f"FAILED: the PyTorch loss did not fall ({py[0]} -> {py[-1]})")
    print(f"largest relative difference {worst:.2e} (tolerance {o.tolerance:.0e})")
    if worst > o.tolerance:
        sys.exit("FAILED: the loss curves differ")


if __name__ == "__main__":
    main()
