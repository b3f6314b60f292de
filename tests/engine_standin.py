"""The engine's library as the app links it, from its stand-in's C source.

The engine's FFI crate builds `[lib] name = "turbospark_ffi"` as a static
library (docs/ENGINE.md section 7): the app links `libturbospark_ffi.a`
(`-lturbospark_ffi`, the Swift package's `linkedLibrary("turbospark_ffi")`)
and carries the engine's code in its own executable. The stand-in
(swift/Fixtures/TurboSparkEngine/Sources/CTurboSpark: turbospark.h and
engine_standin.c, every name the engine exports, each call leaving its own
last error) is built the same way here. The same code as a shared object
serves the tests that load the engine into a process before this library
(LD_PRELOAD, dlopen), which a static library cannot be.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STANDIN_DIR = ROOT / "swift" / "Fixtures" / "TurboSparkEngine" / "Sources" / "CTurboSpark"
STANDIN_SOURCE = STANDIN_DIR / "engine_standin.c"
STANDIN_HEADER = STANDIN_DIR / "turbospark.h"

# The engine's library name: its crate's [lib] name.
ENGINE_LINK_NAME = "turbospark_ffi"
ENGINE_ARCHIVE = f"lib{ENGINE_LINK_NAME}.a"

_C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fPIC"]


def _run(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stderr}"


def static_archive(out_dir: Path) -> Path:
    """`out_dir/libturbospark_ffi.a`: the stand-in, as the engine ships."""
    out_dir.mkdir(parents=True, exist_ok=True)
    obj = out_dir / "engine_standin.o"
    _run(["cc", *_C_FLAGS, f"-I{STANDIN_DIR}", "-c", "-o", str(obj), str(STANDIN_SOURCE)])
    archive = out_dir / ENGINE_ARCHIVE
    archive.unlink(missing_ok=True)
    _run(["ar", "rcs", str(archive), str(obj)])
    obj.unlink()
    return archive


def shared_object(out: Path) -> Path:
    """The same code as a shared object, for loading it into a process first."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(["cc", *_C_FLAGS, "-shared", f"-I{STANDIN_DIR}", "-o", str(out), str(STANDIN_SOURCE)])
    return out
