"""`turbospark-ffi bundle OUT_DIR`: a relocatable folder holding the C library
and everything it needs at run time, so a GUI ships it inside the application
without asking its users to install Python.

    OUT_DIR/
      include/turbospark_ffi.h
      module.modulemap                  module CTurboSparkFFI (Swift/Clang)
      lib/libturbospark_ffi.so          RUNPATH $ORIGIN
      lib/libpython3.11.so.1.0          RUNPATH $ORIGIN
      lib/pkgconfig/turbospark_ffi.pc   prefix=${pcfiledir}/../..
      python/                           the embedded interpreter's home
        turbospark_bundle.txt           the marker the library looks for
        python311.zip                   only the standard library it imports
        lib/python3.11/lib-dynload/     only the extension modules it loads
        site-packages/                  _cffi_backend and this package

The library finds all of it from its own path (src/tsffi_embed.c,
tsffi_find_layout): when `<dir of the .so>/../python/turbospark_bundle.txt`
exists it starts an isolated interpreter whose home and search path lie in
the bundle and nowhere else.

Which standard-library modules go in is measured, not listed: a probe runs
this package's ABI dispatcher -- every entry point, the error paths too (a
bad JSON argument is what imports `json`) -- in a `python -I -S`
interpreter and reports `sys.modules`. The same probe then runs again with
only the written bundle on `sys.path`, and must give the same answers.

Every ELF file is copied, stripped of what is not loaded (debug info, the
static symbol table) and has its RPATH/RUNPATH rewritten in place to exactly
`$ORIGIN`, in pure Python (no patchelf).
"""

from __future__ import annotations

import argparse
import importlib.util
import marshal
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BundleError", "BundleInfo", "write_bundle", "main", "set_rpath_origin",
           "strip_elf", "elf_dynamic", "MARKER"]

MARKER = "turbospark_bundle.txt"
MODULE_NAME = "CTurboSparkFFI"
_PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYTHON_DIRNAME = f"python{_PY}"                       # TSFFI_BUILD_PYTHON_DIRNAME
STDLIB_ZIP_NAME = f"python{_PY.replace('.', '')}.zip"  # TSFFI_BUILD_STDLIB_ZIP_NAME

# Imported whole, as .pyc: a host's locale picks the codec its stdio and file
# names use, and which one that is cannot be measured here. The dependencies
# of every text codec come along (the CJK codecs' extension modules); those
# of the bytes-to-bytes codecs, never a locale's, do not (idna would pull
# unicodedata, 1 MB, and re).
_WHOLE_PACKAGES = ("encodings",)
_CODEC_DEPS_NOT_PULLED = frozenset({
    "encodings.idna", "encodings.bz2_codec", "encodings.zlib_codec", "encodings.base64_codec",
    "encodings.hex_codec", "encodings.quopri_codec", "encodings.uu_codec",
})
# Never bundled, whatever a probe reports.
_NEVER = ("test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data")
# Libraries every Linux system has (glibc's own); anything else an ELF file
# needs is bundled beside it or refused.
_SYSTEM_LIBS = ("libc.so.", "libm.so.", "libpthread.so.", "libdl.so.", "librt.so.",
                "libutil.so.", "ld-linux", "ld64.so.", "libresolv.so.", "libanl.so.")
_SYSTEM_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/")
# Extension modules left out for the standard library's own fallback, because
# they need a library outside glibc (and so the machine's): hashlib without
# _hashlib uses its builtin _md5, _sha* and _blake2 instead of OpenSSL's
# libcrypto (which also reads the system's openssl.cnf). Without those
# fallbacks hashlib would import logging to complain, and fail.
_REPLACED = {"_hashlib": ("_md5", "_sha1", "_sha256", "_sha512", "_sha3", "_blake2")}


class BundleError(Exception):
    """Why a bundle could not be written: one line, for the user."""


# ---------------------------------------------------------------------------
# ELF: the dynamic section, an in-place RUNPATH rewrite, and a strip.

class _Elf:
    """Just enough of an ELF file (32/64-bit, either byte order)."""

    SHF_ALLOC = 0x2
    SHF_INFO_LINK = 0x40
    SHT_NOBITS = 8
    SHT_DYNSYM = 11
    PT_LOAD = 1
    PT_DYNAMIC = 2
    DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
    DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6ffffffc, 0x6ffffffd, 0x6ffffffe, 0x6fffffff
    # Tags whose value is an offset into the dynamic string table.
    STRING_TAGS = frozenset({1, 14, 15, 29, 0x7ffffffd, 0x7fffffff, 0x6ffffefa, 0x6ffffefb,
                             0x6ffffefc})

    def __init__(self, data: bytearray, name: str):
        self.data, self.name = data, name
        if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
            raise BundleError(f"{name} is not an ELF file")
        e = "<" if data[5] == 1 else ">"
        self.is64 = data[4] == 2
        if self.is64:
            self.ehdr = struct.Struct(e + "16sHHIQQQIHHHHHH")
            self.shdr = struct.Struct(e + "IIQQQQIIQQ")
            self.dyn = struct.Struct(e + "qQ")
            self._phdr = struct.Struct(e + "IIQQQQQQ")
        else:
            self.ehdr = struct.Struct(e + "16sHHIIIIIHHHHHH")
            self.shdr = struct.Struct(e + "IIIIIIIIII")
            self.dyn = struct.Struct(e + "iI")
            self._phdr = struct.Struct(e + "IIIIIIII")
        self.sym_name = struct.Struct(e + "I")  # st_name leads Elf32_Sym and Elf64_Sym
        self.verneed = struct.Struct(e + "HHIII")
        self.vernaux = struct.Struct(e + "IHHII")
        self.verdef = struct.Struct(e + "HHHHIII")
        self.verdaux = struct.Struct(e + "II")
        h = self.ehdr.unpack_from(data, 0)
        (_, _, _, _, _, self.phoff, self.shoff, _, _, self.phentsize, self.phnum,
         self.shentsize, self.shnum, self.shstrndx) = h

    def phdrs(self):
        """(type, offset, vaddr, filesz) of every program header."""
        out = []
        for i in range(self.phnum):
            f = self._phdr.unpack_from(self.data, self.phoff + i * self.phentsize)
            if self.is64:
                out.append((f[0], f[2], f[3], f[5]))
            else:
                out.append((f[0], f[1], f[2], f[4]))
        return out

    def sections(self):
        return [list(self.shdr.unpack_from(self.data, self.shoff + i * self.shentsize))
                for i in range(self.shnum)] if self.shoff else []

    def offset_of(self, vaddr: int) -> int:
        for p_type, off, addr, filesz in self.phdrs():
            if p_type == self.PT_LOAD and addr <= vaddr < addr + filesz:
                return off + vaddr - addr
        raise BundleError(f"{self.name}: address {vaddr:#x} is in no loaded segment")

    def dynamic(self):
        """[(tag, value, file offset of the entry)] up to DT_NULL."""
        for p_type, off, _, filesz in self.phdrs():
            if p_type == self.PT_DYNAMIC:
                out = []
                for pos in range(off, off + filesz, self.dyn.size):
                    tag, val = self.dyn.unpack_from(self.data, pos)
                    if tag == self.DT_NULL:
                        break
                    out.append((tag, val, pos))
                return out
        return []

    def strtab(self, dyn) -> tuple[int, int]:
        tags = {t: v for t, v, _ in dyn}
        if self.DT_STRTAB not in tags:
            raise BundleError(f"{self.name} has no dynamic string table")
        return self.offset_of(tags[self.DT_STRTAB]), tags.get(self.DT_STRSZ, 0)

    def string(self, start: int) -> bytes:
        end = self.data.index(b"\0", start)
        return bytes(self.data[start:end])

    def string_refs(self, dyn) -> set[int]:
        """Every offset into the dynamic string table that something uses:
        dynamic entries, dynamic symbol names, version records."""
        refs = {v for t, v, _ in dyn if t in self.STRING_TAGS}
        for sec in self.sections():
            if sec[1] == self.SHT_DYNSYM and sec[9]:
                for i in range(sec[5] // sec[9]):
                    refs.add(self.sym_name.unpack_from(self.data, sec[4] + i * sec[9])[0])
        tags = {t: v for t, v, _ in dyn}
        if self.DT_VERNEED in tags:
            pos = self.offset_of(tags[self.DT_VERNEED])
            for _ in range(tags.get(self.DT_VERNEEDNUM, 0)):
                _, cnt, vn_file, vn_aux, vn_next = self.verneed.unpack_from(self.data, pos)
                refs.add(vn_file)
                aux = pos + vn_aux
                for _ in range(cnt):
                    _, _, _, name, nxt = self.vernaux.unpack_from(self.data, aux)
                    refs.add(name)
                    aux += nxt
                if not vn_next:
                    break
                pos += vn_next
        if self.DT_VERDEF in tags:
            pos = self.offset_of(tags[self.DT_VERDEF])
            for _ in range(tags.get(self.DT_VERDEFNUM, 0)):
                _, _, _, cnt, _, vd_aux, vd_next = self.verdef.unpack_from(self.data, pos)
                aux = pos + vd_aux
                for _ in range(cnt):
                    name, nxt = self.verdaux.unpack_from(self.data, aux)
                    refs.add(name)
                    aux += nxt
                if not vd_next:
                    break
                pos += vd_next
        return refs


def elf_dynamic(path: str | os.PathLike) -> dict:
    """{"needed": [...], "soname": str|None, "runpath": str|None, "rpath": str|None}."""
    elf = _Elf(bytearray(Path(path).read_bytes()), os.fspath(path))
    dyn = elf.dynamic()
    out = {"needed": [], "soname": None, "runpath": None, "rpath": None}
    if not dyn:
        return out
    base, _ = elf.strtab(dyn)
    for tag, val, _ in dyn:
        if tag in (elf.DT_NEEDED, elf.DT_SONAME, elf.DT_RPATH, elf.DT_RUNPATH):
            text = elf.string(base + val).decode("utf-8", "surrogateescape")
            if tag == elf.DT_NEEDED:
                out["needed"].append(text)
            else:
                out[{elf.DT_SONAME: "soname", elf.DT_RPATH: "rpath",
                     elf.DT_RUNPATH: "runpath"}[tag]] = text
    return out


def set_rpath_origin(path: str | os.PathLike, value: bytes = b"$ORIGIN") -> bool:
    """Overwrite every DT_RUNPATH / DT_RPATH string of the ELF file at `path`,
    in place, with `value` and NUL padding to the old string's length.
    Returns whether the file had one. Refuses (BundleError) a string shorter
    than `value`, or one whose tail is shared with another dynamic string (a
    linker may merge "…/lib" and "lib"): rewriting it would rename that one."""
    path = Path(path)
    data = bytearray(path.read_bytes())
    elf = _Elf(data, str(path))
    dyn = elf.dynamic()
    targets = [v for t, v, _ in dyn if t in (elf.DT_RPATH, elf.DT_RUNPATH)]
    if not targets:
        return False
    base, _ = elf.strtab(dyn)
    refs = elf.string_refs(dyn)
    for off in set(targets):
        old = elf.string(base + off)
        if old == value:
            continue
        if len(old) < len(value):
            raise BundleError(f"{path.name}: its rpath {old.decode(errors='replace')!r} is "
                              f"shorter than {value.decode()!r}; relink it with a longer one")
        # (An offset at the terminating NUL is an empty string, and stays one.)
        shared = [r for r in refs if off < r < off + len(old) and r not in targets]
        if shared:
            raise BundleError(f"{path.name}: its rpath's dynamic string shares bytes with "
                              "another string; it cannot be rewritten in place")
        data[base + off:base + off + len(old)] = value + b"\0" * (len(old) - len(value))
    path.write_bytes(data)
    return True


def strip_elf(path: str | os.PathLike) -> int:
    """Drop every section the loader does not map (debug info, .symtab,
    .comment) from the ELF file at `path`, in place; returns the bytes saved.
    Only the common shape is handled -- the mapped sections first, the rest
    after them in the file -- so no section index and no mapped byte moves;
    any other shape is left as it is (0)."""
    path = Path(path)
    data = bytearray(path.read_bytes())
    elf = _Elf(data, str(path))
    secs = elf.sections()
    if not secs or elf.shnum >= 0xff00 or elf.shstrndx >= len(secs):
        return 0
    keep = 1
    while keep < len(secs) and secs[keep][2] & elf.SHF_ALLOC:
        keep += 1
    if any(s[2] & elf.SHF_ALLOC for s in secs[keep:]) or keep == len(secs):
        return 0
    end = max([elf.ehdr.size, elf.phoff + elf.phnum * elf.phentsize] +
              [off + filesz for _, off, _, filesz in elf.phdrs()] +
              [s[4] + s[5] for s in secs[1:keep] if s[1] != elf.SHT_NOBITS])
    # (Unmapped bytes inside the kept range, if any, stay; only their headers go.)
    names = [elf.string(secs[elf.shstrndx][4] + s[0]) for s in secs]
    shstrtab = bytearray(b"\0")
    new = []
    for s, name in zip(secs[:keep], names[:keep]):
        s = list(s)
        if s[0]:
            s[0] = len(shstrtab)
            shstrtab += name + b"\0"
        if s[6] >= keep:
            s[6] = 0
        if s[2] & elf.SHF_INFO_LINK and s[7] >= keep:
            s[7] = 0
        new.append(s)
    shstr_off = end
    new.append([len(shstrtab), 3, 0, 0, shstr_off, 0, 0, 0, 1, 0])
    shstrtab += b".shstrtab\0"
    new[-1][5] = len(shstrtab)
    align = 8 if elf.is64 else 4
    shoff = shstr_off + len(shstrtab)
    shoff += -shoff % align
    out = bytearray(data[:end]) + shstrtab + b"\0" * (shoff - shstr_off - len(shstrtab))
    for s in new:
        out += elf.shdr.pack(*s)
    head = list(elf.ehdr.unpack_from(out, 0))
    head[6], head[12], head[13] = shoff, len(new), len(new) - 1
    out[:elf.ehdr.size] = elf.ehdr.pack(*head)
    saved = len(data) - len(out)
    if saved <= 0:
        return 0
    path.write_bytes(out)
    return saved


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


# ---------------------------------------------------------------------------
# The probe: which modules the library's Python side imports.

# Runs with `python -I -S -c`; argv: the call file, the library, then
# sys.path. Loads the library's own cffi module (_turbospark_ffi_embedded,
# which the .so carries) for the real `ffi` and `lib`, binds the package's
# dispatcher to them as the init code does (ffi_build.py INIT_CODE), and calls
# it as the C wrappers do. Imports nothing else, so that sys.modules at the
# end is what the library needs. Writes R (result) and M (module) lines.
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
import turbospark_ffi
import os
os.path.dirname(os.path.dirname(os.path.realpath(turbospark_ffi.__file__)))
from turbospark_ffi import _abi
_abi.bind(ffi, lib)
with open(calls_file, "rb") as f:
    calls = [line.split(b"\t") for line in f.read().split(b"\n") if line]
write = sys.stdout.write
for i, (fn, a, b) in enumerate(calls):
    out = ffi.new("char *[1]")
    status = _abi.dispatch(int(fn), ffi.new("char[]", bytes.fromhex(a.decode())),
                           ffi.new("char[]", bytes.fromhex(b.decode())), out)
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


def _header_constants(header: Path) -> dict[str, int]:
    import re
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"^#define\s+(TSFFI_[A-Z0-9_]+)\s+(\d+)u?\b", header.read_text(), re.M)}


def _calls(samples: Path, scratch: Path) -> list[tuple[int, bytes, bytes]]:
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


def _run_probe(python: str, calls: list, library: str, path: list[str], scratch: Path,
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
    return results, modules


# ---------------------------------------------------------------------------
# Writing the bundle.

@dataclass
class BundleInfo:
    root: Path
    total_bytes: int = 0
    parts: list = field(default_factory=list)      # [(label, bytes)], largest first
    stdlib_modules: list = field(default_factory=list)
    extension_modules: list = field(default_factory=list)
    stripped_bytes: int = 0
    system_libs: list = field(default_factory=list)  # needed from the system, beyond glibc

    def report(self) -> str:
        lines = [f"wrote {self.root}: {_mb(self.total_bytes)} on disk"]
        width = max((len(label) for label, _ in self.parts), default=0)
        for label, size in self.parts:
            share = 100.0 * size / self.total_bytes if self.total_bytes else 0.0
            lines.append(f"  {label.ljust(width)}  {_mb(size):>9}  {share:4.1f}%")
        lines.append(f"  ({len(self.stdlib_modules)} standard-library modules zipped, "
                     f"{len(self.extension_modules)} extension modules; "
                     f"{_mb(self.stripped_bytes)} of debug info stripped)")
        needs = ", ".join(f"{lib} (by {who})" for lib, who in self.system_libs)
        lines.append(f"  needs from the system: glibc{', ' + needs if needs else ''}")
        return "\n".join(lines)


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 100_000 else f"{n / 1e3:.0f} kB"


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _pyc(code) -> bytes:
    # Timestamp-style header with no timestamp: in a zip with no source
    # beside it, zipimport checks the magic and loads.
    return importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(code)


def _stdlib_file(name: str, stdlib: Path) -> Path | None:
    parts = name.split(".")
    for cand in (stdlib.joinpath(*parts, "__init__.py"), stdlib.joinpath(*parts[:-1],
                                                                         parts[-1] + ".py")):
        if cand.is_file():
            return cand
    return None


def _copy_elf(src: Path, dst: Path, info: BundleInfo) -> None:
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o755)
    info.stripped_bytes += strip_elf(dst)
    set_rpath_origin(dst)


def _resolve_needed(name: str, needer: Path) -> str | None:
    """Where the system's loader would find `name` for `needer` (ldd), or None."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return None
    proc = subprocess.run([ldd, str(needer)], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        left, _, right = line.strip().partition(" => ")
        if left == name and right and not right.startswith("not found"):
            return right.split(" (")[0]
    return None


def _check_dependencies(root: Path, sources: dict[Path, Path], info: BundleInfo) -> None:
    """Every library a bundled ELF file needs is bundled, glibc's, or found in
    a system directory; one found elsewhere (a libffi under /usr/local, say)
    is copied beside the file that needs it (whose rpath is $ORIGIN)."""
    bundled = {p.name for p in root.rglob("*") if p.is_file() and _is_elf(p)}
    for dst, src in list(sources.items()):
        for name in elf_dynamic(dst)["needed"]:
            if name in bundled or name.startswith(_SYSTEM_LIBS):
                continue
            found = _resolve_needed(name, src)
            if found is not None and found.startswith(_SYSTEM_DIRS) and \
                    not found.startswith("/usr/local/"):
                info.system_libs.append((name, dst.name.split(".")[0]))
                continue
            if found is None:
                raise BundleError(f"{dst.name} needs {name}, which was not found")
            if elf_dynamic(dst)["runpath"] is None and elf_dynamic(dst)["rpath"] is None:
                raise BundleError(f"{dst.name} needs {name} (at {found}) and has no rpath to "
                                  "find a bundled copy by; install a build of it that links "
                                  f"{name} statically")
            target = dst.parent / name
            shutil.copyfile(os.path.realpath(found), target)
            os.chmod(target, 0o755)
            set_rpath_origin(target)
            bundled.add(name)
            sources[target] = Path(os.path.realpath(found))


def _package_sources(package: Path) -> list[Path]:
    """Every file of the package but build products: the library (it is in
    lib/), the header copy (in include/), compiled files."""
    out = []
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if not path.is_file() or "__pycache__" in rel.parts or rel.parts[0] == "include":
            continue
        if path.name.startswith("libturbospark_ffi") or \
                path.suffix in (".pyc", ".so", ".dylib", ".tmp", ".o"):
            continue
        out.append(path)
    return out


def write_bundle(out_dir: str | os.PathLike, *, force: bool = False,
                 verify: bool = True) -> BundleInfo:
    """Write the bundle to `out_dir` (which must not exist, or be empty, or --
    with `force` -- be an earlier bundle, which is replaced). Written beside
    it first and renamed into place, so a failure leaves nothing half-done."""
    from . import native

    out = Path(out_dir).absolute()
    if out.exists():
        if not out.is_dir():
            raise BundleError(f"{out} exists and is not a directory")
        if any(out.iterdir()):
            if not force:
                raise BundleError(f"{out} exists and is not empty (--force replaces an "
                                  "earlier bundle)")
            if not (out / "python" / MARKER).is_file():
                raise BundleError(f"{out} is not a bundle; refusing to replace it")
    if sys.platform != "linux":
        raise BundleError("bundles are written on Linux only for now (macOS needs install "
                          "names and code signing; see the README)")
    package = Path(native.package_dir())
    library = Path(native.library_path())
    header = Path(native.include_dir()) / "turbospark_ffi.h"
    if not library.is_file():
        raise BundleError(f"the library is not built ({library}); run: python ffi_build.py")
    if not header.is_file():
        header = package.parent / "include" / "turbospark_ffi.h"
        if not header.is_file():
            raise BundleError(f"the header turbospark_ffi.h is not in {native.include_dir()}")
    libdir = Path(sysconfig.get_config_var("LIBDIR") or "")
    soname = sysconfig.get_config_var("INSTSONAME") or ""
    libpython = libdir / soname
    if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not libpython.is_file():
        raise BundleError(f"this Python ({sys.executable}) has no shared libpython")
    lib_dyn = elf_dynamic(library)
    if soname not in lib_dyn["needed"]:
        raise BundleError(f"{library.name} links {', '.join(lib_dyn['needed'])}, not this "
                          f"Python's {soname}; run the bundle command with the Python the "
                          "library was built with")
    if lib_dyn["runpath"] is None and lib_dyn["rpath"] is None:
        raise BundleError(f"{library.name} has no rpath to rewrite; rebuild it with "
                          "python ffi_build.py")
    spec = importlib.util.find_spec("_cffi_backend")
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        raise BundleError("cffi is not installed in this Python (its _cffi_backend is "
                          "missing); pip install cffi")
    cffi_backend = Path(spec.origin)
    stdlib = Path(sysconfig.get_path("stdlib"))
    dynload = stdlib / "lib-dynload"
    if not dynload.is_dir():
        dynload = Path(sysconfig.get_config_var("DESTSHARED") or dynload)

    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    scratch = Path(tempfile.mkdtemp(prefix="turbospark-bundle-"))
    try:
        info = _write(work, package=package, library=library, header=header,
                      libpython=libpython, cffi_backend=cffi_backend, stdlib=stdlib,
                      dynload=dynload, scratch=scratch, verify=verify)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.rename(out, old / "bundle")
            os.rename(work, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    info.root = out
    return info


def _write(root: Path, *, package: Path, library: Path, header: Path, libpython: Path,
           cffi_backend: Path, stdlib: Path, dynload: Path, scratch: Path,
           verify: bool) -> BundleInfo:
    from . import __version__, native

    info = BundleInfo(root=root)
    home = root / "python"
    site = home / "site-packages"
    bundle_stdlib = home / "lib" / PYTHON_DIRNAME
    bundle_dynload = bundle_stdlib / "lib-dynload"
    for d in (root / "lib" / "pkgconfig", root / "include", site, bundle_dynload):
        d.mkdir(parents=True, exist_ok=True)
    elf_sources: dict[Path, Path] = {}

    # 1. What the Python side imports, measured.
    calls = _calls(package / "samples", scratch)
    whole = sorted({f"{pkg}.{p.stem}" for pkg in _WHOLE_PACKAGES
                    for p in (stdlib / pkg).glob("*.py") if p.stem != "__init__"}
                   - _CODEC_DEPS_NOT_PULLED)
    (scratch / "p1").mkdir()
    results, modules = _run_probe(sys.executable, calls, str(library),
                                  [str(package.parent), str(stdlib), str(dynload),
                                   str(cffi_backend.parent)], scratch / "p1", whole)
    std_files: dict[str, Path] = {}
    ext_files: dict[str, Path] = {}
    stdlib_s, dynload_s = str(stdlib), str(dynload)
    for name, origin in modules.items():
        top = name.split(".")[0]
        if name == "__main__" or origin in ("built-in",):
            continue
        if top in _NEVER:
            raise BundleError(f"the library imports {name}, which a bundle never carries")
        if origin == "frozen":
            src = _stdlib_file(name, stdlib)
            if src is not None:
                std_files[name] = src
        elif top in ("turbospark_ffi", "_cffi_backend", "_turbospark_ffi_embedded"):
            continue
        elif _within(origin, dynload_s):
            ext_files[name] = Path(origin)
        elif _within(origin, stdlib_s) and origin.endswith(".py"):
            std_files[name] = Path(origin)
        else:
            raise BundleError(f"the library imports {name} from {origin}, outside the "
                              "standard library; bundling third-party packages is not "
                              "supported")
    for pkg in _WHOLE_PACKAGES:
        for src in sorted((stdlib / pkg).glob("*.py")):
            name = pkg if src.stem == "__init__" else f"{pkg}.{src.stem}"
            std_files[name] = src
    for name in [n for n in ext_files if n in _REPLACED]:
        del ext_files[name]
        for alt in _REPLACED[name]:
            found = sorted(dynload.glob(alt + ".*.so")) or sorted(dynload.glob(alt + ".so"))
            if found:
                ext_files[alt] = found[0]
            elif alt not in sys.builtin_module_names:
                raise BundleError(f"{name} needs a system library and its fallback {alt} "
                                  "is not in this Python's lib-dynload")
    info.stdlib_modules = sorted(std_files)
    info.extension_modules = sorted(ext_files)

    # 2. The standard library, zipped as .pyc (nothing compiles at start-up).
    with zipfile.ZipFile(home / STDLIB_ZIP_NAME, "w", zipfile.ZIP_STORED) as zf:
        for name in sorted(std_files):
            src = std_files[name]
            rel = src.relative_to(stdlib).as_posix()
            code = compile(src.read_bytes(), f"{STDLIB_ZIP_NAME}/{rel}", "exec",
                           dont_inherit=True)
            entry = zipfile.ZipInfo(rel[:-3] + ".pyc", date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_STORED
            zf.writestr(entry, _pyc(code))
    for name, src in sorted(ext_files.items()):
        dst = bundle_dynload / src.name
        _copy_elf(src, dst, info)
        elf_sources[dst] = src

    # 3. Binaries.
    dst = root / "lib" / library.name
    _copy_elf(library, dst, info)
    elf_sources[dst] = library
    dst = root / "lib" / libpython.name
    _copy_elf(libpython, dst, info)
    elf_sources[dst] = libpython
    dst = site / cffi_backend.name
    _copy_elf(cffi_backend, dst, info)
    elf_sources[dst] = cffi_backend
    _check_dependencies(root, elf_sources, info)

    # 4. This package: its files (the sample installs too, so that a bundle
    # can demo itself) and checked-hash .pyc beside them, which stay valid
    # however the bundle is copied (a timestamp .pyc would not).
    import py_compile
    target = site / "turbospark_ffi"
    for src in _package_sources(package):
        rel = src.relative_to(package)
        dst = target / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        if dst.suffix == ".py":
            py_compile.compile(str(dst), dfile=f"turbospark_ffi/{rel.as_posix()}", doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)

    # 5. The C side: header, module map, pkg-config, marker.
    shutil.copyfile(header, root / "include" / "turbospark_ffi.h")
    (root / "module.modulemap").write_text(
        f"module {MODULE_NAME} {{\n"
        '    header "include/turbospark_ffi.h"\n'
        '    link "turbospark_ffi"\n'
        "    export *\n"
        "}\n")
    (root / "lib" / "pkgconfig" / "turbospark_ffi.pc").write_text(
        native.pkg_config(prefix="${pcfiledir}/../.."))
    abi = _header_constants(header).get("TSFFI_ABI_VERSION")
    (home / MARKER).write_text(
        "turbospark_ffi bundle: the library beside this folder (../lib) starts its\n"
        "embedded Python with this folder as its home and nothing outside it.\n"
        "format: 1\n"
        f"version: {__version__}\n"
        f"abi: {abi}\n"
        f"python: {'%d.%d.%d' % sys.version_info[:3]}\n"
        f"platform: {sysconfig.get_platform()}\n"
        f"soabi: {sysconfig.get_config_var('SOABI')}\n"
        f"stdlib: {STDLIB_ZIP_NAME} ({len(info.stdlib_modules)} modules)\n"
        f"extension modules: {' '.join(info.extension_modules)}\n")

    # 6. The same answers from the bundle alone.
    if verify:
        (scratch / "p2").mkdir()
        again, seen = _run_probe(sys.executable, calls, str(root / "lib" / library.name),
                                 [str(site), str(home / STDLIB_ZIP_NAME), str(bundle_stdlib),
                                  str(bundle_dynload)], scratch / "p2", whole)
        # The build-info answer names paths, which differ by design.
        for i, (a, b) in enumerate(zip(results, again)):
            if i and a != b:
                fn, arg, _ = calls[i]
                got = bytes.fromhex(b.split("\t")[2]).decode("utf-8", "replace")
                raise BundleError(f"with only the bundle on sys.path, call {fn} on "
                                  f"{arg[:60]!r} answers differently: {got[:200]}")
        if len(again) != len(results):
            raise BundleError("with only the bundle on sys.path, the probe stopped early")
        for name, origin in seen.items():
            if name not in modules and origin not in ("built-in", "frozen") and \
                    not _within(origin, str(root)):
                raise BundleError(f"with only the bundle on sys.path, {name} was imported "
                                  f"from {origin}")
            if name.split(".")[0] in ("turbospark_ffi", "_cffi_backend",
                                      "_turbospark_ffi_embedded") and origin and \
                    not _within(origin, str(root)):
                raise BundleError(f"{name} was imported from {origin}, not the bundle")

    # 7. What takes the space.
    info.total_bytes = _tree_size(root)
    parts = [("lib/" + libpython.name, root / "lib" / libpython.name),
             ("lib/" + library.name, root / "lib" / library.name),
             (f"python/{STDLIB_ZIP_NAME} (standard library)", home / STDLIB_ZIP_NAME),
             (f"python/lib/{PYTHON_DIRNAME}/lib-dynload ({len(ext_files)} modules)",
              bundle_dynload),
             ("python/site-packages/" + cffi_backend.name, site / cffi_backend.name),
             ("python/site-packages/turbospark_ffi/samples", target / "samples")]
    sizes = [(label, _tree_size(p)) for label, p in parts if p.exists()]
    pkg_size = _tree_size(target) - (_tree_size(target / "samples")
                                     if (target / "samples").exists() else 0)
    sizes.append(("python/site-packages/turbospark_ffi (.py + .pyc)", pkg_size))
    sizes.append(("everything else", info.total_bytes - sum(s for _, s in sizes)))
    info.parts = sorted(sizes, key=lambda x: -x[1])
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="turbospark-ffi bundle",
        description="Write a relocatable folder holding libturbospark_ffi, its header, "
                    "module map and pkg-config file, and the Python it embeds (only what "
                    "it imports), for an application to ship.")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="the folder to write (must not "
                        "exist, or be empty)")
    parser.add_argument("--force", action="store_true",
                        help="replace OUT_DIR if it holds an earlier bundle")
    parser.add_argument("--no-verify", dest="verify", action="store_false",
                        help="skip re-running the import probe against the written bundle")
    args = parser.parse_args(argv)
    try:
        info = write_bundle(args.out_dir, force=args.force, verify=args.verify)
    except (BundleError, OSError) as exc:
        print(f"turbospark-ffi bundle: error: {exc}", file=sys.stderr)
        return 1
    print(info.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
