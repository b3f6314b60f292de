"""bundle/codesign.py, against signatures real signers wrote: zig's linker
(which signs arm64 macOS output ad hoc, "linker-signed") and Apple's, in
cffi's macOS arm64 wheel on PyPI. The verifier accepts both and fails each
on one flipped byte; what the signer writes verifies, its page hashes equal
Apple's linker's page for page (all but the header's page, whose load
commands it rewrites), and LIEF, macholib and llvm-lipo -- readers that did
not write it -- read the result back.

Nothing here asks a Mac: the kernel's check of an ad hoc signature is the
page hashes against the file, and that is what is compared.
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

import macos_cross as mc
from conftest import ROOT
from macos_standins import TAG, cffi_macos_wheel

from turbospark_ffi.bundle import codesign
from turbospark_ffi.bundle.common import BundleError

WHEEL_CACHE = ROOT / "build" / "test-cache" / "wheels"
BACKEND = f"_cffi_backend.{TAG}.so"
ADHOC, LINKER_SIGNED = 0x2, 0x20000
SHA256 = 2

SOURCE = "int answer(void) { return 42; }\nint twice(int x) { return 2 * x; }\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """arm64 and x86_64 dylibs linked by zig, cffi's backend from both wheels."""
    base = tmp_path_factory.mktemp("codesign")
    (base / "a.c").write_text(SOURCE)
    out = {}
    for arch in mc.ARCHS:
        path = base / f"zig-{arch}.dylib"
        subprocess.run([*mc.zig(), "cc", "-target", mc.ZIG_TARGETS[arch], "-shared", "-o",
                        str(path), str(base / "a.c")], check=True, capture_output=True,
                       timeout=mc.TIMEOUT)
        out[f"zig-{arch}"] = path
    for arch in mc.ARCHS:
        with zipfile.ZipFile(cffi_macos_wheel(WHEEL_CACHE, arch)) as zf:
            path = base / f"cffi-{arch}" / BACKEND
            path.parent.mkdir()
            path.write_bytes(zf.read(BACKEND))
        out[f"cffi-{arch}"] = path
    return out


def _copy(src: Path, tmp_path: Path, name: str | None = None) -> Path:
    dst = tmp_path / (name or src.name)
    shutil.copyfile(src, dst)
    return dst


def _directory(path: Path) -> tuple[int, int, list[bytes]]:
    """(codeLimit, log2 page size, page hashes) of the thin file's slot-0
    CodeDirectory, read here by offsets of cs_blobs.h, not by codesign.py."""
    data = path.read_bytes()
    ncmds = struct.unpack_from("<I", data, 16)[0]
    at = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        if cmd == 0x1D:
            dataoff = struct.unpack_from("<I", data, at + 8)[0]
        at += size
    count = struct.unpack_from(">I", data, dataoff + 8)[0]
    slots = dict(struct.unpack_from(">II", data, dataoff + 12 + 8 * i) for i in range(count))
    cd = dataoff + slots[0]
    hash_offset, _, _, n_code, code_limit, size, _, _, page = \
        struct.unpack_from(">IIIIIBBBB", data, cd + 16)
    return code_limit, page, [data[cd + hash_offset + i * size:cd + hash_offset + (i + 1) * size]
                              for i in range(n_code)]


# (file, identifier, flags): what each real signer wrote, read back.
SIGNED_BY_LINKERS = [
    ("zig-arm64", "zig-arm64.dylib", ADHOC | LINKER_SIGNED),
    ("cffi-arm64", BACKEND, ADHOC | LINKER_SIGNED),
]


@pytest.mark.parametrize("name,identifier,flags", SIGNED_BY_LINKERS)
def test_the_verifier_accepts_what_real_linkers_signed(files, name, identifier, flags):
    path = files[name]
    assert codesign.verify(path) == []
    (info,) = codesign.signature_info(path)
    assert (info.arch, info.identifier, info.flags, info.hash_types) == \
        ("arm64", identifier, flags, (SHA256,))
    lief = mc.lief_module()
    signature = lief.MachO.parse(str(path)).at(0).code_signature
    assert info.code_limit == signature.data_offset


# x86_64 links are not signed by either linker: the verifier says so.
@pytest.mark.parametrize("name", ["zig-x86_64", "cffi-x86_64"])
def test_the_verifier_names_an_unsigned_file(files, name):
    assert codesign.verify(files[name]) == [
        f"{files[name].name}: not signed (no LC_CODE_SIGNATURE)"]


@pytest.mark.parametrize("name", ["zig-arm64", "cffi-arm64", "zig-x86_64", "cffi-x86_64"])
def test_a_flipped_byte_fails_the_signature(files, tmp_path, name):
    path = _copy(files[name], tmp_path)
    codesign.sign(path, "flip")          # signs the x86_64 files; keeps the arm64 ones
    assert codesign.verify(path) == []
    code_limit, page_log2, hashes = _directory(path)
    at = code_limit // 2
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(data)
    page = at >> page_log2
    assert codesign.verify(path) == [
        f"{path.name}: 1 of {len(hashes)} page hashes (sha256) differ from the file, first "
        f"page {page} (bytes {page << page_log2}..)"]


def test_our_page_hashes_are_apple_s_linker_s(files, tmp_path):
    """cffi's arm64 backend, signed again here: every page hash but the
    header's equals the one Apple's linker wrote (same pages of 4096, same
    codeLimit); the header's differs because the signature's size in it did."""
    path = _copy(files["cffi-arm64"], tmp_path)
    apple_limit, apple_page, apple = _directory(files["cffi-arm64"])
    assert codesign.sign(path, BACKEND, force=True) == ["arm64"]
    limit, page, ours = _directory(path)
    assert (limit, page, len(ours)) == (apple_limit, apple_page, len(apple)) == \
        (apple_limit, 12, -(-apple_limit // 4096))
    assert ours[1:] == apple[1:]
    assert ours[0] != apple[0]
    assert ours[0] == hashlib.sha256(path.read_bytes()[:4096]).digest()
    assert codesign.verify(path) == []


def test_signing_an_unsigned_file_as_codesign_does_ad_hoc(files, tmp_path):
    """zig's x86_64 output (unsigned): LC_CODE_SIGNATURE added at the end of
    __LINKEDIT, which grows to hold it; the SuperBlob has codesign's three
    blobs for ad hoc: CodeDirectory, empty requirements, empty CMS wrapper."""
    path = _copy(files["zig-x86_64"], tmp_path)
    size = path.stat().st_size
    assert codesign.sign(path, "org.example.answer") == ["x86_64"]
    assert codesign.verify(path) == []
    (info,) = codesign.signature_info(path)
    assert (info.identifier, info.flags, info.hash_types, info.code_limit) == \
        ("org.example.answer", ADHOC, (SHA256,), size + (-size % 16))
    assert info.pages == -(-info.code_limit // 4096)
    lief = mc.lief_module()
    binary = lief.MachO.parse(str(path)).at(0)
    linkedit = binary.get_segment("__LINKEDIT")
    signature = binary.code_signature
    assert signature.data_offset == info.code_limit
    assert signature.data_offset + signature.data_size == path.stat().st_size == \
        linkedit.file_offset + linkedit.file_size
    assert linkedit.virtual_size % 0x1000 == 0 and linkedit.virtual_size >= linkedit.file_size
    data = path.read_bytes()
    blob = data[signature.data_offset:]
    count = struct.unpack_from(">I", blob, 8)[0]
    slots = [struct.unpack_from(">II", blob, 12 + 8 * i) for i in range(count)]
    assert [slot for slot, _ in slots] == [0, 2, 0x10000]
    assert [blob[offset:offset + 4].hex() for _, offset in slots] == \
        ["fade0c02", "fade0c01", "fade0b01"]
    assert blob[slots[1][1]:slots[1][1] + 12] == bytes.fromhex("fade0c01 0000000c 00000000")
    from macholib.MachO import MachO
    assert [lc.cmd for lc, _, _ in MachO(str(path)).headers[0].commands].count(0x1D) == 1


def test_a_valid_signature_is_kept_byte_for_byte(files, tmp_path):
    path = _copy(files["cffi-arm64"], tmp_path)
    assert codesign.sign(path, "other") == []
    assert path.read_bytes() == files["cffi-arm64"].read_bytes()


def test_a_universal_file_is_joined_and_signed_per_slice(files, tmp_path):
    """zig's two slices joined as lipo joins them (llvm-lipo reads the
    result back and thins it to the same bytes); signing signs the unsigned
    x86_64 slice and keeps zig's arm64 one."""
    path = tmp_path / "fat.dylib"
    path.write_bytes(codesign.join_universal([files["zig-arm64"].read_bytes(),
                                              files["zig-x86_64"].read_bytes()]))
    assert mc.lipo_archs(path) == ["arm64", "x86_64"]
    thin = tmp_path / "thin-arm64"
    subprocess.run([mc.llvm_lipo(), path, "-thin", "arm64", "-output", thin], check=True)
    assert thin.read_bytes() == files["zig-arm64"].read_bytes()
    assert codesign.verify(path) == ["fat.dylib (x86_64): not signed (no LC_CODE_SIGNATURE)"]
    assert codesign.sign(path, "fat") == ["x86_64"]
    assert codesign.verify(path) == []
    subprocess.run([mc.llvm_lipo(), path, "-thin", "arm64", "-output", thin], check=True)
    assert thin.read_bytes() == files["zig-arm64"].read_bytes()
    assert mc.lipo_archs(path) == ["arm64", "x86_64"]


# (what the file holds, the error's words)
BAD_FILES = [
    (b"#!/bin/sh\necho not code\n" * 4,
     "not a thin 64-bit Mach-O image (magic 0x622f2123; accepts 0xfeedfacf)"),
    (struct.pack("<IiiIIII", 0xFEEDFACE, 7, 3, 6, 0, 0, 0) + bytes(64),
     "a 32-bit Mach-O image; signing accepts 64-bit ones (arm64, x86_64) only"),
    (b"\xcf\xfa\xed\xfe\x07", "5 bytes, too short for a Mach-O header (32 bytes)"),
    (struct.pack("<IiiIIIII", 0xFEEDFACF, 0x01000007, 3, 6, 1, 4000, 0, 0) + bytes(64),
     "its load commands (4000 bytes) run past the end of the file (96 bytes)"),
]


@pytest.mark.parametrize("data,message", BAD_FILES,
                         ids=["script", "32-bit", "truncated", "commands-past-end"])
def test_error_a_file_that_cannot_be_signed(tmp_path, data, message):
    path = tmp_path / "bad.dylib"
    path.write_bytes(data)
    with pytest.raises(BundleError) as caught:
        codesign.sign(path, "x")
    assert str(caught.value) == f"bad.dylib: {message}"
    assert codesign.verify(path) == [f"bad.dylib: {message}"]
    assert path.read_bytes() == data


def test_error_two_slices_of_one_architecture(files):
    arm64 = files["zig-arm64"].read_bytes()
    with pytest.raises(BundleError) as caught:
        codesign.join_universal([arm64, arm64])
    assert str(caught.value) == "two arm64 slices: a universal file holds one of each architecture"

