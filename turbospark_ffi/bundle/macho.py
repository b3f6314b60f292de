"""Mach-O, as much as a macOS bundle needs: what a file is (its slices,
install name, load commands, rpaths) and one in-place rewrite that makes a
copied file load from the bundle.

Read and edited with LIEF (PyPI `lief`), never by hand. Chosen over
macholib because the rewrite needs more than renaming in place: it adds and
removes LC_RPATH commands, removes LC_CODE_SIGNATURE (every edit voids it),
and drops the debug map's STABS symbols, which name the object files and
source folders of the machine that linked the file -- that needs the symbol
and string tables rebuilt and the indirect-symbol indices renumbered, which
LIEF's writer does and macholib's (load commands only, within the header's
padding) does not. LIEF handles universal files slice by slice and writes
them back universal.

Nothing here signs: a rewritten file is unsigned until bundle/codesign.py
signs it ad hoc (the bundle does, after the file's last edit), and Apple
silicon loads no unsigned code. A file that needs no edit is not rewritten
(`rewrite_needed`), so it keeps its vendor's signature.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import codesign
from .common import BundleError

__all__ = ["MachOSlice", "is_macho", "macho_slices", "relocate_macho", "rewrite_needed",
           "exports_symbol", "flat_bound", "bind_flat_lookups", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'turbospark_ffi[bundle]'"

# Mach-O magics: thin 32/64-bit either byte order, and the universal header.
_THIN = {b"\xfe\xed\xfa\xce", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xcf\xfa\xed\xfe"}
_FAT = b"\xca\xfe\xba\xbe"
# The load commands that name another image: what dyld loads for this one.
_LOAD_KINDS = ("LOAD_DYLIB", "LOAD_WEAK_DYLIB", "REEXPORT_DYLIB", "LAZY_LOAD_DYLIB",
               "LOAD_UPWARD_DYLIB")
_N_STAB = 0xE0


@dataclass(frozen=True)
class MachOSlice:
    """One architecture of a Mach-O file, as dyld sees it."""
    arch: str                          # "arm64", "x86_64", ...
    filetype: str                      # "DYLIB", "BUNDLE", "EXECUTE", ...
    install_name: str | None           # LC_ID_DYLIB, None for a bundle (.so)
    loads: tuple[tuple[str, str], ...]  # (command, name), e.g. ("LOAD_DYLIB", "/usr/lib/...")
    rpaths: tuple[str, ...]            # every LC_RPATH, in order


def _lief():
    try:
        import lief
    except ImportError:
        raise BundleError("writing a macOS bundle needs LIEF, which reads and edits Mach-O "
                          f"files; install it with: {INSTALL_HINT}") from None
    lief.logging.disable()
    return lief


def is_macho(path: str | os.PathLike) -> bool:
    """Whether the file is Mach-O, thin or universal. (0xcafebabe is also a
    Java class file's magic; a universal header's count of architectures is
    small, a class file's version number is not.)"""
    with open(path, "rb") as f:
        head = f.read(8)
    if head[:4] in _THIN:
        return True
    return head[:4] == _FAT and len(head) == 8 and 0 < int.from_bytes(head[4:], "big") < 32


def _parse(path: Path):
    lief = _lief()
    fat = lief.MachO.parse(str(path))
    if fat is None or fat.size == 0:
        raise BundleError(f"{path} is not a Mach-O file LIEF can read")
    return lief, fat


def _arch(lief, binary) -> str:
    cpu = binary.header.cpu_type
    return {lief.MachO.Header.CPU_TYPE.ARM64: "arm64",
            lief.MachO.Header.CPU_TYPE.X86_64: "x86_64",
            lief.MachO.Header.CPU_TYPE.X86: "i386",
            lief.MachO.Header.CPU_TYPE.ARM: "arm"}.get(cpu, str(cpu).rsplit(".", 1)[-1].lower())


def macho_slices(path: str | os.PathLike) -> list[MachOSlice]:
    """Every slice of the Mach-O file at `path` (one for a thin file)."""
    path = Path(path)
    lief, fat = _parse(path)
    out = []
    for binary in fat:
        install_name, loads, rpaths = None, [], []
        for cmd in binary.commands:
            kind = cmd.command.name
            if kind == "ID_DYLIB":
                install_name = cmd.name
            elif kind in _LOAD_KINDS:
                loads.append((kind, cmd.name))
            elif kind == "RPATH":
                rpaths.append(cmd.path)
        out.append(MachOSlice(arch=_arch(lief, binary),
                              filetype=binary.header.file_type.name,
                              install_name=install_name, loads=tuple(loads),
                              rpaths=tuple(rpaths)))
    return out


def exports_symbol(path: str | os.PathLike, name: str) -> bool:
    """Whether every slice of the file exports `name` (C spelling: `_` + the
    C name), as a Python library exports PyInit_x for a built-in module x."""
    lief, fat = _parse(Path(path))
    return all(any(s.name == name for s in binary.exported_symbols) for binary in fat)


def _zero_header_padding(binary) -> None:
    """Zero the bytes between the end of the load commands and the first
    section of __TEXT (the header padding), through LIEF's own patching."""
    header = binary.header
    start = (32 if header.magic.name.endswith("64") else 28) + header.sizeof_cmds
    text = binary.get_segment("__TEXT")
    if text is None or text.file_offset != 0:
        return
    first = min((section.offset for section in text.sections if section.offset),
                default=start)
    if first > start:
        binary.patch_address(text.virtual_address + start, [0] * (first - start))


def flat_bound(path: str | os.PathLike) -> list[str]:
    """The symbols the file binds by flat lookup (ordinal -2: the first image
    loaded that exports the name), in any slice, sorted: what a module linked
    with `-undefined dynamic_lookup` (cffi's backend) leaves to chance."""
    lief, fat = _parse(Path(path))
    names = set()
    # Indexed with the parsed file held: LIEF (nanobind) reads freed memory
    # when a slice outlives it (seen: a crash).
    for i in range(fat.size):
        binary = fat.at(i)
        names |= {s.name for s in binary.imported_symbols
                  if s.has_binding_info and s.binding_info.library_ordinal == -2}
    return sorted(names)


def rewrite_needed(path: str | os.PathLike, *, install_name: str | None,
                   renames: dict[str, str], rpaths: list[str]) -> bool:
    """Whether `relocate_macho` with these arguments would change the file:
    an id, load command or rpath to rewrite, or a debug map to drop. A
    signature alone is not a reason (it is kept when nothing else changes)."""
    lief, fat = _parse(Path(path))
    for binary in fat:
        commands = [(cmd.command.name, cmd) for cmd in binary.commands]
        ids = [cmd.name for kind, cmd in commands if kind == "ID_DYLIB"]
        if install_name is not None and ids != [install_name]:
            return True
        if any(kind in _LOAD_KINDS and cmd.name in renames for kind, cmd in commands):
            return True
        if [cmd.path for kind, cmd in commands if kind == "RPATH"] != list(rpaths):
            return True
        if any(s.raw_type & _N_STAB for s in binary.symbols):
            return True
    return False


def relocate_macho(path: str | os.PathLike, *, install_name: str | None,
                   renames: dict[str, str], rpaths: list[str],
                   add_loads: tuple[str, ...] = ()) -> None:
    """Rewrite the Mach-O file at `path` in place, every slice alike: its
    LC_ID_DYLIB becomes `install_name` (a file without one keeps none: an
    extension module built as a bundle has no id); each load command whose
    name is a key of `renames` names its value instead; its LC_RPATHs become
    exactly `rpaths`; each of `add_loads` gets an LC_LOAD_DYLIB after the
    others; the debug map (STABS symbols) and the code signature are
    removed. Written to a temporary file beside it and renamed over it,
    so a failure leaves the old file whole."""
    path = Path(path)
    lief, fat = _parse(path)
    rpath_kind = lief.MachO.LoadCommand.TYPE.RPATH
    for binary in fat:
        has_id = False
        for cmd in list(binary.commands):
            kind = cmd.command.name
            if kind == "ID_DYLIB":
                has_id = True
                if install_name is not None:
                    cmd.name = install_name
            elif kind in _LOAD_KINDS and cmd.name in renames:
                cmd.name = renames[cmd.name]
        if install_name is not None and not has_id:
            raise BundleError(f"{path.name} has no install name (LC_ID_DYLIB) to set")
        # One at a time, holding no reference to a removed command: LIEF
        # (nanobind) aborts the whole process when a list of commands
        # outlives a removal and a command is added after it (seen here).
        while True:
            cmd = binary.get(rpath_kind)
            if cmd is None:
                break
            binary.remove(cmd)
            del cmd
        for rpath in rpaths:
            binary.add(lief.MachO.RPathCommand.create(rpath))
        for name in add_loads:
            binary.add_library(name)
        for symbol in [s for s in binary.symbols if s.raw_type & _N_STAB]:
            binary.remove(symbol)
        if binary.has_code_signature:
            binary.remove_signature()
    tmp = path.with_name(path.name + ".tmp")
    try:
        fat.write(str(tmp))
        if not tmp.is_file():
            raise BundleError(f"LIEF wrote nothing for {path.name}")
        # A second pass over what was written, changing no load command:
        # LIEF leaves the bytes of removed or moved commands in the header's
        # padding (seen: a whole old LC_LOAD_DYLIB naming the build's
        # /Library/Frameworks Python), which would ship a path of the
        # machine that built it. The padding is unused by definition; zeroed.
        lief, written = _parse(tmp)
        for binary in written:
            _zero_header_padding(binary)
        written.write(str(tmp))
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    # What was asked is what the file now says, slice by slice.
    for got in macho_slices(path):
        names = {name for _, name in got.loads}
        left = sorted(set(renames) & names - set(renames.values()))
        if left or list(got.rpaths) != list(rpaths) or \
                (install_name is not None and got.install_name != install_name):
            raise BundleError(f"rewriting {path.name} ({got.arch}) did not take: id "
                              f"{got.install_name}, rpaths {list(got.rpaths)}, still loads "
                              f"{left}")


# dyld's bind opcodes (mach-o/loader.h): the high nibble is the opcode, the
# low one its immediate.
_BIND_SET_DYLIB_ORDINAL_IMM, _BIND_SET_DYLIB_ORDINAL_ULEB = 0x10, 0x20
_BIND_SET_DYLIB_SPECIAL_IMM, _BIND_SET_SYMBOL_TRAILING_FLAGS_IMM = 0x30, 0x40
_BIND_SET_ADDEND_SLEB, _BIND_SET_SEGMENT_AND_OFFSET_ULEB, _BIND_ADD_ADDR_ULEB = 0x60, 0x70, 0x80
_BIND_DO_BIND_ADD_ADDR_ULEB, _BIND_DO_BIND_ULEB_TIMES_SKIPPING_ULEB = 0xA0, 0xC0
_BIND_THREADED = 0xD0
_FLAT_LOOKUP_IMM = 0xE           # BIND_SPECIAL_DYLIB_FLAT_LOOKUP (-2) as an immediate
_DYNAMIC_LOOKUP_ORDINAL = 0xFE   # the same in an undefined symbol's n_desc
_MH_TWOLEVEL = 0x80
_LC_SYMTAB = 0x2
_LC_DYLD_INFO = (0x22, 0x80000022)
_LC_DYLD_CHAINED_FIXUPS = 0x80000034
# LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB, LC_LAZY_LOAD_DYLIB,
# LC_LOAD_UPWARD_DYLIB: each takes the next library ordinal.
_DYLIB_LOADS = (0xC, 0x80000018, 0x8000001F, 0x20, 0x80000023)


def _after_uleb(data: bytes | bytearray, at: int) -> int:
    while data[at] & 0x80:
        at += 1
    return at + 1


def _flat_binds(stream: bytes | bytearray, name: str) -> list[tuple[int, list[str]]]:
    """Each flat-lookup ordinal (BIND_OPCODE_SET_DYLIB_SPECIAL_IMM -2) in a
    bind stream: (its offset in the stream, the symbols bound under it)."""
    out: list[tuple[int, list[str]]] = []
    current: list[str] | None = None
    at = 0
    while at < len(stream):
        op, imm = stream[at] & 0xF0, stream[at] & 0x0F
        at += 1
        if op == _BIND_SET_DYLIB_SPECIAL_IMM:
            current = [] if imm == _FLAT_LOOKUP_IMM else None
            if current is not None:
                out.append((at - 1, current))
        elif op in (_BIND_SET_DYLIB_ORDINAL_IMM, _BIND_SET_DYLIB_ORDINAL_ULEB):
            current = None
            if op == _BIND_SET_DYLIB_ORDINAL_ULEB:
                at = _after_uleb(stream, at)
        elif op == _BIND_SET_SYMBOL_TRAILING_FLAGS_IMM:
            end = stream.index(b"\0", at)
            if current is not None:
                current.append(stream[at:end].decode("utf-8", "replace"))
            at = end + 1
        elif op in (_BIND_SET_ADDEND_SLEB, _BIND_SET_SEGMENT_AND_OFFSET_ULEB,
                    _BIND_ADD_ADDR_ULEB, _BIND_DO_BIND_ADD_ADDR_ULEB):
            at = _after_uleb(stream, at)
        elif op == _BIND_DO_BIND_ULEB_TIMES_SKIPPING_ULEB:
            at = _after_uleb(stream, _after_uleb(stream, at))
        elif op == _BIND_THREADED:
            raise BundleError(f"{name}: threaded binds (arm64e), which the bundle does not "
                              "rewrite")
    return out


def _load_commands(image: bytes | bytearray) -> list[tuple[int, int]]:
    ncmds = struct.unpack_from("<I", image, 16)[0]
    out, at = [], 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", image, at)
        out.append((cmd, at))
        at += size
    return out


def _bind_thin(image: bytearray, name: str, wanted: Callable[[str], bool]) -> list[str]:
    commands = _load_commands(image)
    ordinal = sum(1 for cmd, _ in commands if cmd in _DYLIB_LOADS)
    info = [struct.unpack_from("<10I", image, at + 8) for cmd, at in commands
            if cmd in _LC_DYLD_INFO]
    if any(cmd == _LC_DYLD_CHAINED_FIXUPS for cmd, _ in commands) or len(info) != 1:
        raise BundleError(f"{name} binds by chained fixups, not dyld-info opcodes: the bundle "
                          "cannot bind its flat lookups to the bundled Python")
    if not struct.unpack_from("<I", image, 24)[0] & _MH_TWOLEVEL or not 0 < ordinal < 16:
        raise BundleError(f"{name}: a flat-namespace image, or {ordinal} libraries loaded (the "
                          "last one's ordinal must fit an opcode's immediate, 1..15)")
    rebound: list[str] = []
    bind, weak, lazy = (info[0][2:4], info[0][4:6], info[0][6:8])
    for offset, size in (bind, weak, lazy):
        for at, symbols in _flat_binds(image[offset:offset + size], name):
            if symbols and all(wanted(s) for s in symbols):
                image[offset + at] = _BIND_SET_DYLIB_ORDINAL_IMM | ordinal
                rebound += symbols
            elif any(wanted(s) for s in symbols):
                raise BundleError(f"{name}: one flat bind covers {symbols[0]} and symbols "
                                  "that are not the Python's; not rewritten")
    for cmd, at in commands:
        if cmd != _LC_SYMTAB:
            continue
        symoff, nsyms, stroff, _ = struct.unpack_from("<4I", image, at + 8)
        for i in range(nsyms):
            entry = symoff + 16 * i
            strx, ntype, _, desc = struct.unpack_from("<IBBH", image, entry)
            undefined_external = ntype & 0x0E == 0 and ntype & 0x01
            if undefined_external and desc >> 8 == _DYNAMIC_LOOKUP_ORDINAL:
                end = image.index(b"\0", stroff + strx)
                if wanted(image[stroff + strx:end].decode("utf-8", "replace")):
                    # n_desc's high byte is the library ordinal (GET_LIBRARY_ORDINAL).
                    struct.pack_into("<H", image, entry + 6, (desc & 0xFF) | ordinal << 8)
    return sorted(set(rebound))


def bind_flat_lookups(path: str | os.PathLike, wanted: Callable[[str], bool]) -> list[str]:
    """In place, every slice: each flat-lookup bind of symbols `wanted`
    accepts now names the file's last LC_LOAD_DYLIB (two-level binding), in
    the bind, weak and lazy opcode streams and in the symbol table. Each
    rewrite is one byte (a special ordinal's opcode becomes an ordinal's, the
    same length), so nothing moves. Returns the symbols rebound. The file's
    signature is void after it (sign it after)."""
    path = Path(path)
    data = path.read_bytes()
    slices = codesign.thin_slices(data)
    rebound: set[str] = set()
    images = []
    for _, _, offset, size, _ in slices:
        image = bytearray(data[offset:offset + size])
        rebound |= set(_bind_thin(image, path.name, wanted))
        images.append(bytes(image))
    fat = len(slices) > 1 or slices[0][2] != 0
    path.write_bytes(codesign.join_universal(images) if fat else images[0])
    return sorted(rebound)
