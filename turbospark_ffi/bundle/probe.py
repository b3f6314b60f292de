"""The import probe: which modules the library's Python side imports, and
what it answers, measured by running every ABI entry point (failures
included: a bad JSON argument is what imports `json`) in a bare interpreter.
The same probe runs again with only the written bundle on `sys.path` and must
give the same answers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .elf import BundleError

__all__ = ["header_constants", "probe_calls", "run_probe"]

# Runs with `python -I -S -c`; argv: the call file, the library, then
# sys.path, the package's folder first. Loads the library's own cffi module
# (_turbospark_ffi_embedded, which the .so carries) for the real `ffi` and
# `lib`, attaches the package to them with the init code's own function
# (turbospark_ffi/_boot.py), and calls the dispatcher as the C wrappers do.
# Imports nothing else, so that sys.modules at the end is what the library
# needs. Writes R (result) and M (module) lines.
_PROBE = r"""
import sys
calls_file, library = sys.argv[1], sys.argv[2]
sys.path[:] = sys.argv[3:]
sys.path_importer_cache.clear()
import _cffi_backend
# The importlib machinery already loaded: importlib.util would import more.
import _frozen_importlib, _frozen_importlib_external
loader = _frozen_importlib_external.ExtensionFileLoader("_turbospark_ffi_embedded", library)
spec = _frozen_importlib_external.spec_from_file_location(
    "_turbospark_ffi_embedded", library, loader=loader)
embedded = _frozen_importlib.module_from_spec(spec)
sys.modules["_turbospark_ffi_embedded"] = embedded
loader.exec_module(embedded)
ffi, lib = embedded.ffi, embedded.lib
from turbospark_ffi import _boot
_abi = _boot.attach(ffi, lib, sys.path[0])
with open(calls_file, "rb") as f:
    calls = [line.split(b"\t") for line in f.read().split(b"\n") if line]
write = sys.stdout.write
for i, (fn, a, b) in enumerate(calls):
    out = ffi.new("char *[1]")
    status = _abi.dispatch(int(fn), ffi.new("char[]", bytes.fromhex(a.decode())),
                           ffi.new("char[]", bytes.fromhex(b.decode())), ffi.NULL, out)
    if status == 0:
        payload = ffi.string(out[0])
        lib.tsffi_string_free(out[0])
    else:
        n = lib.tsffi_last_error(ffi.NULL, 0)
        buf = ffi.new("char[]", n + 1)
        lib.tsffi_last_error(buf, n + 1)
        payload = ffi.string(buf)
    write("R\t%d\t%d\t%s\n" % (i, status, payload.hex()))
for name in sorted(WHOLE):
    try:
        __import__(name)
    except Exception:
        pass
for name, module in sorted(sys.modules.items()):
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None) or getattr(module, "__file__", None) or ""
    write("M\t%s\t%s\n" % (name, origin))
"""


def header_constants(header: Path) -> dict[str, int]:
    from ..native import header_constants as read
    return read(header.read_text())


def probe_calls(samples: Path, scratch: Path) -> list[tuple[int, bytes, bytes]]:
    """Every ABI entry point on good and bad input: what the probe runs."""
    broken = scratch / "broken"
    broken.mkdir()
    (broken / "model_weights.bin").write_bytes(b"not an index" * 8)
    installs = sorted(p for p in samples.iterdir() if p.is_dir()) if samples.is_dir() else []
    dirs = [str(p).encode() for p in installs] + [str(broken).encode(),
                                                  str(scratch / "missing").encode()]
    if installs:
        dirs.append(str(installs[0] / "model_weights.bin").encode())
    plans = [b"", b'{"speculation": 2}', b'{"speculativeDrafter": "dflash", "speculation": 2}',
             b'{"speculation": 2, "speculativeDrafter": "dflash", "temperature": 0.7}',
             b'{"speculation": "off", "someHostKey": [1, {"a": null}]}',
             b'{"speculation": 99}', b'{"engineBlocker": "the engine says no", "speculation": 3}']
    out: list[tuple[int, bytes, bytes]] = [(0, b"", b"")]
    for d in dirs:
        out += [(1, d, b""), (1, d, b'{"speculativeDrafter": "dflash"}'), (5, d, b"")]
        out += [(4, d, p) for p in plans]
    choice = (b'{"drafter": "mtp", "installHasMtpHead": true, "installHasDflash": false, '
              b'"note": null}')
    out += [(2, choice, b'{"speculation": 2}'), (2, choice, b""), (2, b"{}", b""),
            (2, b"{not json", b""), (2, b"[1, 2]", b"")]
    bad = [b"", b'{"speculation": 2}', b"{bad", b"[1]", b'"text"', b'{"speculaton": 2}',
           b'{"speculation": "2x"}', b"\xff\xfe", b'{"speculation": NaN}',
           b'{"temperature": -1}', b'{"speculation": 1, "speculation": 2}',
           b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}", b'{"engineBlocker": ""}',
           b'{"speculation": 2, "speculativeDrafter": "dflash", "temperature": 0.5}',
           b'{"speculation": "auto", "engineBlocker": "blocked"}', b"{" * 200]
    out += [(3, b, b"") for b in bad]
    out += [(1, b"", b""), (1, b"\xff\xfe", b""), (4, b"", b"")]
    return out


def run_probe(python: str, calls: list, library: str, path: list[str], scratch: Path,
               whole: list[str]) -> tuple[list[str], dict[str, str]]:
    calls_file = scratch / "calls.txt"
    calls_file.write_bytes(b"".join(b"%d\t%s\t%s\n" % (fn, a.hex().encode(), b.hex().encode())
                                    for fn, a, b in calls))
    code = _PROBE.replace("WHOLE", repr(whole))
    proc = subprocess.run([python, "-I", "-S", "-B", "-c", code, str(calls_file), library,
                           *path], capture_output=True, text=True, cwd=str(scratch),
                          env={"LC_ALL": "C.UTF-8"})
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BundleError(f"the import probe failed: {last}")
    results, modules = [], {}
    for line in proc.stdout.splitlines():
        kind, _, rest = line.partition("\t")
        if kind == "R":
            results.append(rest)
        elif kind == "M":
            name, _, origin = rest.partition("\t")
            modules[name] = origin
    # Status 6 is TSFFI_ERR_INTERNAL: the package itself failed (a module
    # missing from an install, say). Comparing two runs that fail alike
    # would prove nothing, so no probe may answer it.
    broken = [r for r in results if r.split("\t")[1] == "6"]
    if broken:
        got = bytes.fromhex(broken[0].split("\t")[2]).decode("utf-8", "replace")
        raise BundleError(f"the library's Python side fails: {got[:300]}")
    return results, modules
