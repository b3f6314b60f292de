"""ELF, as much as a bundle needs: the dynamic section (what a file needs,
its soname and rpath), an in-place rewrite of RUNPATH/RPATH to `$ORIGIN`, and
stripping.

The rewrite is hand-written on purpose: it is one overwrite of a string in
the dynamic string table, and it refuses every shape it cannot do in place
(a shorter string, one sharing bytes with another) instead of relinking;
patchelf would add a binary dependency for the same effect. Stripping is
binutils' `strip`.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

from .common import BundleError

__all__ = ["BundleError", "elf_dynamic", "set_rpath_origin", "strip_elf", "is_elf"]


class _Elf:
    """Just enough of an ELF file (32/64-bit, either byte order)."""

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
    """Drop what the loader never maps (debug info, the static symbol table,
    .comment) from the ELF file at `path`, in place, with binutils' `strip`
    (it sits beside the linker the build needs anyway); returns the bytes
    saved. A file strip cannot handle is an error, never silently kept."""
    path = Path(path)
    strip = shutil.which("strip")
    if strip is None:
        raise BundleError("binutils' strip is not on PATH (it comes with the linker: "
                          "apt-get install binutils)")
    before = path.stat().st_size
    proc = subprocess.run([strip, "--strip-all", "--remove-section=.comment", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BundleError(f"strip {path.name} failed: {last}")
    return max(before - path.stat().st_size, 0)


def is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"
