"""Builds einsumdb's C++ core (the _einsumdb extension) with the project's CMake build, for
`pip install .` (pyproject.toml holds the package's metadata).

The extension is CMake's target _einsumdb, built for the Python that runs pip. By default in a
build directory of its own; with EINSUMDB_BUILD_DIR set, in that existing CMake build tree (the
one scripts/demo.sh and scripts/test.sh make), so that installing after a build compiles nothing
again. EINSUMDB_CMAKE_ARGS adds arguments to the configuration.
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
# The version is written once, on the project() line of CMakeLists.txt.
VERSION = re.search(r"project\(einsumdb VERSION ([0-9.]+)",
                    (ROOT / "CMakeLists.txt").read_text()).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("EINSUMDB_BUILD_DIR")
        build = pathlib.Path(build).resolve() if build else pathlib.Path(self.build_temp).resolve() / "cmake"
        build.mkdir(parents=True, exist_ok=True)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        if not (build / "CMakeCache.txt").exists():
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), *generator,
                            "-DCMAKE_BUILD_TYPE=Release", "-DEINSUMDB_TESTS=OFF",
                            "-DEINSUMDB_BENCHMARKS=OFF", "-DEINSUMDB_PYTHON=ON",
                            f"-DPython3_EXECUTABLE={sys.executable}",
                            *shlex.split(os.environ.get("EINSUMDB_CMAKE_ARGS", ""))],
                           check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "_einsumdb", "-j",
                        str(os.cpu_count() or 1)], check=True)
        built = sorted((build / "python" / "einsumdb").glob("_einsumdb*.so"))
        if not built:
            raise RuntimeError(f"CMake built no _einsumdb module in {build}/python/einsumdb")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(version=VERSION, ext_modules=[Extension("einsumdb._einsumdb", sources=[])],
      cmdclass={"build_ext": CMakeBuild},
      # setuptools' own build directory, beside CMake's build/ rather than in it.
      options={"build": {"build_base": "build-python"}})
