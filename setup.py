"""Adds the already built C++ parts to `pip install .` (see pyproject.toml).

The wheel gets BUILD/python/_offload_runtime*.so as a top-level module and
BUILD/bin/{offload-import,offload-opt,offload-translate,offload-run} as
offload/bin/, where offload._tools finds them. BUILD is $OFFLOAD_BUILD_DIR,
else ./build. A missing piece stops the install with a message saying what
to build.
"""
import glob
import os
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("OFFLOAD_BUILD_DIR", os.path.join(ROOT, "build")))
TOOLS = ("offload-import", "offload-opt", "offload-translate", "offload-run")


class BuildPyWithBuiltParts(build_py):
    def run(self):
        super().run()
        ext = sorted(glob.glob(os.path.join(BUILD, "python", "_offload_runtime*.so")))
        missing = [] if ext else [os.path.join(BUILD, "python", "_offload_runtime*.so")]
        missing += [os.path.join(BUILD, "bin", t) for t in TOOLS
                    if not os.path.isfile(os.path.join(BUILD, "bin", t))]
        if missing:
            raise SystemExit("offload: pip install packages the CMake build's outputs, and "
                             "these are missing: " + ", ".join(missing) + ". Build first "
                             "(scripts/setup.sh, or cmake --build " + BUILD + "), or set "
                             "OFFLOAD_BUILD_DIR to the build folder.")
        self.copy_file(ext[-1], os.path.join(self.build_lib, os.path.basename(ext[-1])))
        bindir = os.path.join(self.build_lib, "offload", "bin")
        self.mkpath(bindir)
        for t in TOOLS:
            self.copy_file(os.path.join(BUILD, "bin", t), os.path.join(bindir, t))


class BinaryDistribution(Distribution):
    """The wheel holds a compiled module: tag it for this platform."""

    def has_ext_modules(self):
        return True


# setuptools' own build folder must not be ./build, the CMake build tree, and
# nothing is written into the checkout: a fresh temporary folder per build.
_scratch = tempfile.mkdtemp(prefix="offload-pip-")
setup(cmdclass={"build_py": BuildPyWithBuiltParts}, distclass=BinaryDistribution,
      options={"build": {"build_base": os.path.join(_scratch, "build")},
               "egg_info": {"egg_base": _scratch}})
