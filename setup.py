"""setuptools' half of `pip install .` (pyproject.toml): CMake builds the library and the
extension module for this interpreter into a staging prefix laid out like the wheel
(netsparse/ with the module and the Python files, netsparse/.libs/ with libnetsparse.so, the
module's rpath $ORIGIN/.libs), and the staged package is what the wheel holds.

NETSPARSE_JOBS sets the build's parallelism (default 2); NETSPARSE_CMAKE_ARGS adds CMake options.
"""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self):
        super().__init__("netsparse._netsparse", sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        root = pathlib.Path(__file__).parent.resolve()
        temp = pathlib.Path(self.build_temp).resolve()
        build, stage = temp / "cmake", temp / "stage"
        shutil.rmtree(stage, ignore_errors=True)
        args = [
            "cmake", "-S", str(root), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DNETSPARSE_BUILD_TESTS=OFF", "-DNETSPARSE_BUILD_BENCH=OFF",
            "-DNETSPARSE_BUILD_EXAMPLES=OFF",
            "-DPython3_EXECUTABLE=" + sys.executable,
            "-DCMAKE_INSTALL_PREFIX=" + str(stage),
            "-DCMAKE_INSTALL_LIBDIR=netsparse/.libs",
            "-DNETSPARSE_PYTHON_INSTALL_DIR=.",
        ]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
        args += shlex.split(os.environ.get("NETSPARSE_CMAKE_ARGS", ""))
        subprocess.run(args, check=True)
        jobs = os.environ.get("NETSPARSE_JOBS", "2")
        subprocess.run(["cmake", "--build", str(build), "-j", jobs], check=True)
        subprocess.run(["cmake", "--install", str(build)], check=True)
        staged = stage / "netsparse"
        if not (staged / "__init__.py").exists():
            sys.exit("netsparse: the Python module was not built (see CMake's 'python:' message "
                     "above: python3-dev, pybind11-dev, numpy and mpi4py for " + sys.executable + ")")
        # The wheel holds the package and its library, not the C/C++ development files.
        for extra in ("cmake", "pkgconfig"):
            shutil.rmtree(staged / ".libs" / extra, ignore_errors=True)
        target = pathlib.Path(self.build_lib).resolve() / "netsparse"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(staged, target, symlinks=True)


setup(
    packages=[],
    ext_modules=[CMakeExtension()],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
