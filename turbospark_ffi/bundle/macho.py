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
from dataclasses import dataclass
from pathlib import Path

from .common import BundleError

__all__ = ["MachOSlice", "is_macho", "macho_slices", "relocate_macho", "rewrite_needed",
           "exports_symbol", "INSTALL_HINT"]

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
                   renames: dict[str, str], rpaths: list[str]) -> None:
    """Rewrite the Mach-O file at `path` in place, every slice alike: its
    LC_ID_DYLIB becomes `install_name` (a file without one keeps none: an
    extension module built as a bundle has no id); each load command whose
    name is a key of `renames` names its value instead; its LC_RPATHs become
    exactly `rpaths`; the debug map (STABS symbols) and the code signature
    are removed. Written to a temporary file beside it and renamed over it,
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
