"""Build hook: bundle the shared library into the package.

``pip install ./bindings/python`` (after ``make``) copies ``target/release/libslotpartner.so`` of
this checkout, or the file ``SLOTPARTNER_LIB`` names, into the built package as
``slotpartner/libslotpartner.so``, where the package looks first. The wheel is then tagged for
this platform (``py3-none-<platform>``: the library is native, the Python code is not tied to
a Python version). Without a library the build still succeeds, with a warning, and the installed
package looks for the library through SLOTPARTNER_LIB or the system's loader at import.

``pip wheel ./bindings/python -w DIR`` builds in an isolated environment with setuptools and wheel
from PyPI (pyproject.toml); offline, ``pip wheel --no-build-isolation`` uses the environment's own
setuptools (70.1 or newer, or an older one with the ``wheel`` package). The library keeps its
SONAME (``libslotpartner.so.0``); ctypes loads the bundled copy by path. The wheel is not
``manylinux``: the library is linked against this machine's glibc. ``tests/install/install_test.sh``
builds the wheel, installs it into a fresh virtual environment and handles a callback there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:  # older setuptools: the wheel package (pip's build environment has it)
    try:
        from wheel.bdist_wheel import bdist_wheel  # type: ignore
    except ImportError:
        bdist_wheel = None

HERE = Path(__file__).resolve().parent
LIBRARY = "libslotpartner.so"


def library() -> Path | None:
    explicit = os.environ.get("SLOTPARTNER_LIB")
    candidates = [Path(explicit)] if explicit else [HERE.parent.parent / "target" / "release" / LIBRARY]
    return next((path for path in candidates if path.is_file()), None)


class BuildWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        found = library()
        target = Path(self.build_lib) / "slotpartner" / LIBRARY
        if found is None:
            # A copy left in build/ by an earlier build must not slip into a pure wheel.
            target.unlink(missing_ok=True)
            self.warn(f"{LIBRARY} not found (run `make` first, or set SLOTPARTNER_LIB): not bundled")
            return
        self.announce(f"bundling {found} as {target}", level=2)
        shutil.copyfile(found, target)


class NativeDistribution(Distribution):
    """Carries a native library: built and installed per platform (platlib), like an extension."""

    def has_ext_modules(self) -> bool:
        return library() is not None


commands: dict[str, type] = {"build_py": BuildWithLibrary}
if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        def get_tag(self) -> tuple[str, str, str]:
            python, abi, platform = super().get_tag()
            return ("py3", "none", platform) if not self.root_is_pure else (python, abi, platform)

    commands["bdist_wheel"] = PlatformWheel

setup(distclass=NativeDistribution, cmdclass=commands)
