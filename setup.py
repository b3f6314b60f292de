"""setuptools glue: build libtsffi into the package while building it.

cffi's own `cffi_modules=` hook builds a Python extension module (no `lib`
prefix, no libpython link), which is not what a native host links; so the
embedding library gets its own build step here, from ffi_build.py.
"""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        sys.path.insert(0, str(ROOT))
        import ffi_build

        package_dir = Path(self.build_lib) / "turbospark_ffi"
        ffi_build.build(package_dir=package_dir, tmpdir=Path(self.build_lib).parent / "cffi-tmp")


class BinaryDistribution(Distribution):
    """The wheel carries a shared library tied to this Python X.Y and platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
