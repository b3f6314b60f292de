"""Ad hoc code signatures for Mach-O files, written and checked in Python.

Why here: Xcode signs an embedded framework without `--deep`, so every
Mach-O file nested in it must already carry a signature, and on Apple
silicon an unsigned arm64 image does not load at all. The bundle rewrites
every file it copies (bundle/macho.py), which voids its signature, and no
signer is packaged for Linux (no `codesign`, `ldid` or `rcodesign` in Debian
or on PyPI here). An ad hoc signature is small: what `codesign --sign -`
writes for a file outside a bundle, and what Xcode replaces inside-out with
the team's identity.

The format is Apple's (xnu, `osfmk/kern/cs_blobs.h`), every integer of it
big-endian while the Mach-O around it is little-endian:

    LC_CODE_SIGNATURE (linkedit_data_command) -> the last bytes of __LINKEDIT:
    SuperBlob   magic 0xfade0cc0, length, count, (slot type, offset) x count
      slot 0        CodeDirectory 0xfade0c02 (version 0x20400): SHA-256 of
                    every 4096-byte page of the file up to the signature
                    (codeLimit), the identifier, flags = adhoc; special slot
                    -2 holds the requirements blob's hash
      slot 2        Requirements  0xfade0c01, empty (codesign's, ad hoc)
      slot 0x10000  BlobWrapper   0xfade0b01, empty (no CMS: ad hoc)

A universal file is signed slice by slice and its fat header rewritten
(each slice grows). A slice whose signature already verifies is kept byte
for byte: a vendor's (or a linker's) signature survives a copy.

`verify(path)` checks what the kernel checks of an ad hoc signature as pages
load -- every CodeDirectory's page hashes against the file -- and the frame
around them: the requirements hash, the blob inside __LINKEDIT, codeLimit at
the signature. It also reads SHA-1 directories, which older signers wrote
beside SHA-256 ones. It does not check a certificate chain (an ad hoc
signature has none) or a bundle's resource seal.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .common import BundleError

__all__ = ["SignatureProblem", "SignatureInfo", "sign", "verify", "signature_info",
           "join_universal", "thin_slices", "PAGE_SIZE"]

_MH_MAGIC_64 = 0xFEEDFACF
_MH_MAGIC_32 = 0xFEEDFACE
_FAT_MAGIC = 0xCAFEBABE
_LC_SEGMENT_64 = 0x19
_LC_CODE_SIGNATURE = 0x1D
_CSMAGIC_EMBEDDED_SIGNATURE = 0xFADE0CC0
_CSMAGIC_CODEDIRECTORY = 0xFADE0C02
_CSMAGIC_REQUIREMENTS = 0xFADE0C01
_CSMAGIC_BLOBWRAPPER = 0xFADE0B01
_CSSLOT_CODEDIRECTORY = 0
_CSSLOT_REQUIREMENTS = 2
_CSSLOT_ALTERNATE_CODEDIRECTORIES = 0x1000
_CSSLOT_SIGNATURESLOT = 0x10000
_CS_ADHOC = 0x2
_CD_VERSION = 0x20400          # with execSeg fields: what codesign writes since macOS 10.14
_CD_HEADER = 88                # the CodeDirectory's fixed fields at that version
_HASHES = {1: ("sha1", 20), 2: ("sha256", 32)}   # CS_HASHTYPE_SHA1, CS_HASHTYPE_SHA256
_SHA256 = 2
PAGE_SIZE = 4096               # 2^12: codesign's page for every macOS file
_CPU_ARM64 = 0x0100000C
_CPU_X86_64 = 0x01000007
# Virtual-memory page of each architecture: __LINKEDIT's vmsize is rounded to it.
_VM_PAGE = {_CPU_ARM64: 0x4000, _CPU_X86_64: 0x1000}
# Slice alignment in a universal file, as Apple's lipo writes it (2^14 for
# arm64's 16 kB pages, 2^12 for x86_64's).
_FAT_ALIGN = {_CPU_ARM64: 14, _CPU_X86_64: 12}
_ARCH_NAMES = {_CPU_ARM64: "arm64", _CPU_X86_64: "x86_64"}
# The empty requirement set codesign writes for an ad hoc signature.
_EMPTY_REQUIREMENTS = struct.pack(">III", _CSMAGIC_REQUIREMENTS, 12, 0)
_EMPTY_CMS = struct.pack(">II", _CSMAGIC_BLOBWRAPPER, 8)


class SignatureProblem(BundleError):
    """A Mach-O file whose signature does not verify, or that cannot be signed."""


@dataclass(frozen=True)
class _Slice:
    """What signing needs of one thin 64-bit Mach-O image."""
    cputype: int
    ncmds: int
    sizeofcmds: int
    commands_end: int        # first byte after the load commands
    first_content: int       # first section or segment byte after the header
    linkedit_at: int         # offset of __LINKEDIT's load command
    linkedit_fileoff: int
    linkedit_filesize: int
    linkedit_vmsize: int
    signature_at: int | None  # offset of LC_CODE_SIGNATURE's load command
    text_fileoff: int
    text_filesize: int


@dataclass(frozen=True)
class SignatureInfo:
    """One slice's signature as read back: for tests and reports."""
    arch: str
    identifier: str
    flags: int
    hash_types: tuple[int, ...]    # of every CodeDirectory, slot 0 first
    code_limit: int
    pages: int


def _arch_name(cputype: int) -> str:
    return _ARCH_NAMES.get(cputype, f"cputype {cputype:#x}")


def _parse_slice(data: bytes | bytearray, name: str) -> _Slice:
    if len(data) < 32:
        raise SignatureProblem(f"{name}: {len(data)} bytes, too short for a Mach-O header "
                               "(32 bytes)")
    magic, cputype, _, _, ncmds, sizeofcmds = struct.unpack_from("<IiiIII", data, 0)
    if magic == _MH_MAGIC_32:
        raise SignatureProblem(f"{name}: a 32-bit Mach-O image; signing accepts 64-bit ones "
                               "(arm64, x86_64) only")
    if magic != _MH_MAGIC_64:
        raise SignatureProblem(f"{name}: not a thin 64-bit Mach-O image (magic {magic:#x}; "
                               f"accepts {_MH_MAGIC_64:#x})")
    end = 32 + sizeofcmds
    if end > len(data):
        raise SignatureProblem(f"{name}: its load commands ({sizeofcmds} bytes) run past the "
                               f"end of the file ({len(data)} bytes)")
    at = 32
    first = len(data)
    linkedit = signature = text = None
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        if size < 8 or at + size > end:
            raise SignatureProblem(f"{name}: load command {cmd:#x} at byte {at} has size "
                                   f"{size}, outside the load commands")
        if cmd == _LC_SEGMENT_64:
            segname = data[at + 8:at + 24].rstrip(b"\0").decode("ascii", "replace")
            vmsize, fileoff, filesize = struct.unpack_from("<QQQ", data, at + 32)
            nsects = struct.unpack_from("<I", data, at + 64)[0]
            if segname == "__LINKEDIT":
                linkedit = (at, fileoff, filesize, vmsize)
            elif segname == "__TEXT":
                text = (fileoff, filesize)
            if fileoff and filesize:
                first = min(first, fileoff)
            for i in range(nsects):
                # section_64: offset at +48 of its 80 bytes; zerofill sections have none.
                offset = struct.unpack_from("<I", data, at + 72 + 80 * i + 48)[0]
                if offset:
                    first = min(first, offset)
        elif cmd == _LC_CODE_SIGNATURE:
            signature = at
        at += size
    if linkedit is None:
        raise SignatureProblem(f"{name}: no __LINKEDIT segment, where a signature lives")
    return _Slice(cputype=cputype, ncmds=ncmds, sizeofcmds=sizeofcmds, commands_end=end,
                  first_content=first, linkedit_at=linkedit[0], linkedit_fileoff=linkedit[1],
                  linkedit_filesize=linkedit[2], linkedit_vmsize=linkedit[3],
                  signature_at=signature, text_fileoff=text[0] if text else 0,
                  text_filesize=text[1] if text else 0)


def thin_slices(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """A universal file's slices: (cputype, cpusubtype, offset, size, align);
    one (cputype, 0, 0, len, 0) for a thin file."""
    if len(data) >= 8 and struct.unpack_from(">I", data, 0)[0] == _FAT_MAGIC:
        count = struct.unpack_from(">I", data, 4)[0]
        if not 0 < count < 32 or 8 + 20 * count > len(data):
            raise SignatureProblem(f"a universal header claiming {count} slices in "
                                   f"{len(data)} bytes")
        out = [struct.unpack_from(">iiIII", data, 8 + 20 * i) for i in range(count)]
        for cputype, _, offset, size, _ in out:
            if offset + size > len(data):
                raise SignatureProblem(f"the {_arch_name(cputype)} slice ends at byte "
                                       f"{offset + size}, past the file's {len(data)}")
        return out
    cputype = struct.unpack_from("<i", data, 4)[0] if len(data) >= 8 else 0
    return [(cputype, 0, 0, len(data), 0)]


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def _code_directory(image: bytes | bytearray, code_limit: int, identifier: str,
                    requirements: bytes, sl: _Slice) -> bytes:
    ident = identifier.encode() + b"\0"
    special = 2                                   # slot -1 Info.plist (none), -2 requirements
    pages = (code_limit + PAGE_SIZE - 1) // PAGE_SIZE
    ident_offset = _CD_HEADER
    hash_offset = ident_offset + len(ident) + 32 * special
    length = hash_offset + 32 * pages
    header = struct.pack(">IIIIIIIIIBBBBIIIIQQQQ",
                         _CSMAGIC_CODEDIRECTORY, length, _CD_VERSION, _CS_ADHOC,
                         hash_offset, ident_offset, special, pages, code_limit,
                         32, _SHA256, 0, 12, 0,      # hashSize, hashType, platform, log2(page)
                         0, 0, 0, 0,                 # scatter, team, spare3, codeLimit64
                         sl.text_fileoff, sl.text_filesize, 0)  # execSeg base, limit, flags
    assert len(header) == _CD_HEADER
    # Special slots sit just before hashOffset, slot -1 nearest it: memory
    # order is -N .. -1, so -2 (requirements) comes first, then -1 (none).
    slots = hashlib.sha256(requirements).digest() + bytes(32)
    hashes = b"".join(hashlib.sha256(image[i:min(i + PAGE_SIZE, code_limit)]).digest()
                      for i in range(0, code_limit, PAGE_SIZE))
    return header + ident + slots + hashes


def _signature_size(code_limit: int, identifier: str) -> int:
    pages = (code_limit + PAGE_SIZE - 1) // PAGE_SIZE
    cd = _CD_HEADER + len(identifier.encode()) + 1 + 32 * 2 + 32 * pages
    return 12 + 8 * 3 + cd + len(_EMPTY_REQUIREMENTS) + len(_EMPTY_CMS)


def _sign_thin(data: bytes, identifier: str, name: str) -> bytes:
    """One thin image, signed ad hoc: its old signature (if any) dropped, the
    load command added or reused, __LINKEDIT grown to end with the new one."""
    sl = _parse_slice(data, name)
    image = bytearray(data)
    if sl.signature_at is not None:
        old_off = struct.unpack_from("<I", image, sl.signature_at + 8)[0]
        del image[old_off:]
        command_at = sl.signature_at
    else:
        if sl.commands_end + 16 > sl.first_content:
            raise SignatureProblem(f"{name}: no room for LC_CODE_SIGNATURE after its load "
                                   f"commands ({sl.first_content - sl.commands_end} bytes "
                                   "free, 16 needed); link it with -headerpad_max_install_names")
        command_at = sl.commands_end
        struct.pack_into("<II", image, 16, sl.ncmds + 1, sl.sizeofcmds + 16)
    linkedit_end = sl.linkedit_fileoff + sl.linkedit_filesize
    if sl.signature_at is None and len(image) > linkedit_end:
        raise SignatureProblem(f"{name}: {len(image) - linkedit_end} bytes after __LINKEDIT, "
                               "where the signature must go")
    code_limit = _align(min(len(image), linkedit_end) if sl.signature_at is None
                        else len(image), 16)
    image.extend(bytes(code_limit - len(image)))
    size = _signature_size(code_limit, identifier)
    struct.pack_into("<IIII", image, command_at, _LC_CODE_SIGNATURE, 16, code_limit, size)
    filesize = code_limit + size - sl.linkedit_fileoff
    vmsize = max(sl.linkedit_vmsize, _align(filesize, _VM_PAGE.get(sl.cputype, 0x4000)))
    struct.pack_into("<QQQ", image, sl.linkedit_at + 32, vmsize, sl.linkedit_fileoff, filesize)
    # Page 0 holds the header just edited: hashed after every edit.
    directory = _code_directory(image, code_limit, identifier, _EMPTY_REQUIREMENTS, sl)
    blobs = [(_CSSLOT_CODEDIRECTORY, directory), (_CSSLOT_REQUIREMENTS, _EMPTY_REQUIREMENTS),
             (_CSSLOT_SIGNATURESLOT, _EMPTY_CMS)]
    offset = 12 + 8 * len(blobs)
    index = b""
    for slot, blob in blobs:
        index += struct.pack(">II", slot, offset)
        offset += len(blob)
    superblob = struct.pack(">III", _CSMAGIC_EMBEDDED_SIGNATURE, offset, len(blobs)) + index + \
        b"".join(blob for _, blob in blobs)
    assert len(superblob) == size
    return bytes(image) + superblob


def _problems_thin(data: bytes, name: str) -> list[str]:
    """Why one thin image's signature does not verify; [] when it does."""
    try:
        sl = _parse_slice(data, name)
    except SignatureProblem as e:
        return [str(e)]
    if sl.signature_at is None:
        return [f"{name}: not signed (no LC_CODE_SIGNATURE)"]
    dataoff, datasize = struct.unpack_from("<II", data, sl.signature_at + 8)
    linkedit_end = sl.linkedit_fileoff + sl.linkedit_filesize
    problems = []
    if dataoff + datasize > len(data):
        return [f"{name}: the signature ({dataoff}+{datasize}) runs past the file's end "
                f"({len(data)})"]
    if not sl.linkedit_fileoff <= dataoff or dataoff + datasize > linkedit_end:
        problems.append(f"{name}: the signature ({dataoff}+{datasize}) is outside __LINKEDIT "
                        f"({sl.linkedit_fileoff}+{sl.linkedit_filesize})")
    blob = data[dataoff:dataoff + datasize]
    magic, length, count = struct.unpack_from(">III", blob, 0) if len(blob) >= 12 else (0, 0, 0)
    if magic != _CSMAGIC_EMBEDDED_SIGNATURE or length > datasize:
        return problems + [f"{name}: no embedded-signature SuperBlob at byte {dataoff} "
                           f"(magic {magic:#x}, want {_CSMAGIC_EMBEDDED_SIGNATURE:#x})"]
    slots = dict(struct.unpack_from(">II", blob, 12 + 8 * i) for i in range(count))
    directories = [s for s in slots if s == _CSSLOT_CODEDIRECTORY or
                   _CSSLOT_ALTERNATE_CODEDIRECTORIES <= s < _CSSLOT_ALTERNATE_CODEDIRECTORIES + 5]
    if _CSSLOT_CODEDIRECTORY not in slots:
        return problems + [f"{name}: the SuperBlob has no CodeDirectory (slot 0)"]
    for slot in sorted(directories):
        problems += _directory_problems(data, blob, slots, slots[slot], dataoff, name)
    return problems


def _directory_problems(data: bytes, blob: bytes, slots: dict[int, int], at: int,
                        dataoff: int, name: str) -> list[str]:
    (magic, length, _, _, hash_offset, _, n_special, n_code, code_limit, hash_size,
     hash_type, _, page_log2) = struct.unpack_from(">IIIIIIIIIBBBB", blob, at)
    if magic != _CSMAGIC_CODEDIRECTORY:
        return [f"{name}: the blob at signature byte {at} is not a CodeDirectory "
                f"(magic {magic:#x})"]
    if hash_type not in _HASHES or _HASHES[hash_type][1] != hash_size:
        return [f"{name}: CodeDirectory hash type {hash_type} (size {hash_size}); accepts "
                "1 (SHA-1, 20) and 2 (SHA-256, 32)"]
    algorithm = _HASHES[hash_type][0]
    problems = []
    if code_limit != dataoff:
        problems.append(f"{name}: codeLimit {code_limit} is not the signature's offset "
                        f"{dataoff}: the hashes do not cover the file up to it")
    page = 1 << page_log2 if page_log2 else code_limit
    if n_code != (code_limit + page - 1) // page:
        problems.append(f"{name}: {n_code} page hashes for codeLimit {code_limit} in pages "
                        f"of {page}")
    cd = blob[at:at + length]
    bad = [i for i in range(min(n_code, (code_limit + page - 1) // page))
           if hashlib.new(algorithm, data[i * page:min((i + 1) * page, code_limit)]).digest()
           != cd[hash_offset + i * hash_size:hash_offset + (i + 1) * hash_size]]
    if bad:
        problems.append(f"{name}: {len(bad)} of {n_code} page hashes ({algorithm}) differ "
                        f"from the file, first page {bad[0]} (bytes {bad[0] * page}..)")
    if n_special >= 2 and _CSSLOT_REQUIREMENTS in slots:
        req_at = slots[_CSSLOT_REQUIREMENTS]
        req_len = struct.unpack_from(">I", blob, req_at + 4)[0]
        want = cd[hash_offset - 2 * hash_size:hash_offset - hash_size]
        if hashlib.new(algorithm, blob[req_at:req_at + req_len]).digest() != want:
            problems.append(f"{name}: the requirements blob's hash differs from special "
                            "slot -2")
    return problems


def _slice_name(path: Path, cputype: int, sliced: bool) -> str:
    return f"{path.name} ({_arch_name(cputype)})" if sliced else path.name


def verify(path: str | os.PathLike) -> list[str]:
    """Why the Mach-O file at `path` (thin or universal) does not carry a
    valid signature in every slice, one line each; [] when it does."""
    path = Path(path)
    data = path.read_bytes()
    try:
        slices = thin_slices(data)
    except SignatureProblem as e:
        return [f"{path.name}: {e}"]
    sliced = len(slices) > 1 or slices[0][2] != 0
    problems = []
    for cputype, _, offset, size, _ in slices:
        problems += _problems_thin(data[offset:offset + size], _slice_name(path, cputype, sliced))
    return problems


def signature_info(path: str | os.PathLike) -> list[SignatureInfo]:
    """Each slice's signature, read back (a slice without one is left out)."""
    path = Path(path)
    data = path.read_bytes()
    out = []
    for cputype, _, offset, size, _ in thin_slices(data):
        thin = data[offset:offset + size]
        sl = _parse_slice(thin, path.name)
        if sl.signature_at is None:
            continue
        dataoff, datasize = struct.unpack_from("<II", thin, sl.signature_at + 8)
        blob = thin[dataoff:dataoff + datasize]
        count = struct.unpack_from(">I", blob, 8)[0]
        slots = dict(struct.unpack_from(">II", blob, 12 + 8 * i) for i in range(count))
        types = []
        first = None
        for slot in sorted(s for s in slots if s == 0 or 0x1000 <= s < 0x1005):
            fields = struct.unpack_from(">IIIIIIIIIBBBB", blob, slots[slot])
            types.append(fields[10])
            first = first or fields
        at = slots[0]
        ident_at = at + first[5]
        identifier = blob[ident_at:blob.index(b"\0", ident_at)].decode()
        out.append(SignatureInfo(arch=_arch_name(cputype), identifier=identifier,
                                 flags=first[3], hash_types=tuple(types),
                                 code_limit=first[8], pages=first[7]))
    return out


def join_universal(thin: list[bytes]) -> bytes:
    """Thin 64-bit images joined into one universal file, as `lipo -create`
    does: a fat header, each slice at its architecture's alignment."""
    seen = set()
    entries = []
    for image in thin:
        sl = _parse_slice(image, "a slice")
        if sl.cputype in seen:
            raise SignatureProblem(f"two {_arch_name(sl.cputype)} slices: a universal file "
                                   "holds one of each architecture")
        seen.add(sl.cputype)
        subtype = struct.unpack_from("<i", image, 8)[0]
        entries.append((sl.cputype, subtype, image))
    return _fat(entries)


def _fat(entries: list[tuple[int, int, bytes]]) -> bytes:
    header = struct.pack(">II", _FAT_MAGIC, len(entries))
    offset = 8 + 20 * len(entries)
    body = b""
    for cputype, subtype, image in entries:
        align = _FAT_ALIGN.get(cputype, 14)
        at = _align(offset, 1 << align)
        body += bytes(at - offset) + image
        header += struct.pack(">iiIII", cputype, subtype, at, len(image), align)
        offset = at + len(image)
    return header + body


def sign(path: str | os.PathLike, identifier: str, *, force: bool = False) -> list[str]:
    """Sign the Mach-O file at `path` ad hoc, in place, every slice whose
    signature does not already verify (with `force`, every slice);
    `identifier` names the code (the framework's bundle identifier for its
    binary). Returns the architectures signed ([] when every slice kept its
    signature). Written beside the file and renamed over it."""
    path = Path(path)
    data = path.read_bytes()
    slices = thin_slices(data)
    sliced = len(slices) > 1 or slices[0][2] != 0
    signed = []
    entries = []
    for cputype, subtype, offset, size, _ in slices:
        thin = data[offset:offset + size]
        name = _slice_name(path, cputype, sliced)
        if force or _problems_thin(thin, name):
            thin = _sign_thin(thin, identifier, name)
            signed.append(_arch_name(cputype))
        entries.append((cputype, subtype, thin))
    if not signed:
        return []
    out = _fat(entries) if sliced else entries[0][2]
    tmp = path.with_name(path.name + ".signing")
    tmp.write_bytes(out)
    os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)
    problems = verify(path)
    if problems:
        raise SignatureProblem(f"signed {path.name}, and it does not verify: {problems[0]}")
    return signed
