"""The package built for one interpreter, imported from another, names both (issue 37 item 5).

Simulated on one interpreter: a copy of the built package whose extension carries another
Python's ABI tag (so this interpreter cannot find it) and whose _build_info names that Python.
Usage: python3 check_wrong_interpreter.py <build>/python
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

built = pathlib.Path(sys.argv[1]) / "netsparse"
with tempfile.TemporaryDirectory() as tmp:
    pkg = pathlib.Path(tmp) / "netsparse"
    shutil.copytree(built, pkg)
    for ext in pkg.glob("_netsparse*.so"):
        ext.rename(pkg / "_netsparse.cpython-30-x86_64-linux-gnu.so")
    (pkg / "_build_info.py").write_text(
        'python_executable = "/opt/python3.0/bin/python3"\npython_version = "3.0"\n')
    run = subprocess.run([sys.executable, "-c", "import netsparse"], cwd=tmp,
                         capture_output=True, text=True, env={"PYTHONPATH": tmp, "PATH": "/usr/bin:/bin"})
    message = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
    want = ["built for Python 3.0 (/opt/python3.0/bin/python3)",
            "this is Python %d.%d (%s)" % (sys.version_info[0], sys.version_info[1], sys.executable),
            "-DPython3_EXECUTABLE=" + sys.executable]
    missing = [w for w in want if w not in message]
    if run.returncode == 0 or missing:
        print("FAIL: exit %d, message %r lacks %r" % (run.returncode, message, missing))
        sys.exit(1)
    print("wrong interpreter named: " + message)
