"""What the macOS layout needs beyond the folder itself: the release zip a
Swift package's `.binaryTarget(url:checksum:)` fetches, and a universal
cffi backend joined from cffi's thin macOS wheels.

The zip keeps the framework's symbolic links as links (Info-ZIP's way, what
`zip -ry` and `ditto -c -k --keepParent` write: a Unix mode with S_IFLNK in
the entry's external attributes, the link's target as its data). Followed
instead, a versioned framework holds every file twice (5.4 MB where 2.7 MB
is right, measured on this bundle) and codesign rejects it as ambiguous.
Entries are sorted and dated 1980-01-01, so the same folder gives the same
bytes and the same checksum. The checksum is SHA-256 of the zip's bytes:
what `swift package compute-checksum` prints (tests/test_swift_manifest.py).
"""

from __future__ import annotations

import hashlib
import os
import stat
import zipfile
from pathlib import Path

from . import codesign
from .common import BundleError

__all__ = ["write_release_zip", "checksum", "join_backend"]

_EPOCH = (1980, 1, 1, 0, 0, 0)
_UNIX = 3           # ZipInfo.create_system: the external attributes hold a Unix mode


def checksum(path: str | os.PathLike) -> str:
    """SHA-256 of the file, in hex: `swift package compute-checksum`'s value."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _entry(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.create_system = _UNIX
    info.external_attr = mode << 16
    return info


def write_release_zip(folder: Path, zip_path: Path) -> str:
    """`folder` (the XCFramework) zipped with its parent's name kept and its
    symbolic links stored as links; returns the zip's checksum."""
    if not folder.is_dir():
        raise BundleError(f"{folder} is not a folder to zip")
    base = folder.parent
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in [folder, *sorted(folder.rglob("*"))]:
            rel = path.relative_to(base).as_posix()
            if path.is_symlink():
                target = os.readlink(path)
                if os.path.isabs(target) or not (path.parent / target).resolve().is_relative_to(
                        folder.resolve()):
                    raise BundleError(f"{rel} links to {target}, outside {folder.name}: a "
                                      "release zip holds only links within the folder")
                info = _entry(rel, stat.S_IFLNK | 0o755)
                zf.writestr(info, target, compress_type=zipfile.ZIP_STORED)
            elif path.is_dir():
                info = _entry(rel + "/", stat.S_IFDIR | 0o755)
                info.external_attr |= 0x10          # MS-DOS directory bit, as Info-ZIP sets
                zf.writestr(info, b"")
            else:
                mode = 0o755 if path.stat().st_mode & 0o100 else 0o644
                zf.writestr(_entry(rel, stat.S_IFREG | mode), path.read_bytes())
    return checksum(zip_path)


def join_backend(backend: Path, wheels: list[Path], tag: str, scratch: Path) -> Path:
    """cffi's backend made universal: the Python's own `backend` and the
    backend of each wheel in `wheels` (cffi's macOS wheels, one architecture
    each), joined slice by slice as `lipo -create` joins them. Each slice
    keeps its bytes, and so its vendor's signature. A Python without cffi
    (no `backend` file) takes the wheels' slices alone. Returns the joined
    file, written under `scratch`."""
    name = backend.name
    slices: dict[int, tuple[str, bytes]] = {}
    own = [(str(backend), backend.read_bytes())] if backend.is_file() else []
    for source, data in [*own, *((str(w), _wheel_backend(w, name, tag)) for w in wheels)]:
        for cputype, _, offset, size, _ in codesign.thin_slices(data):
            if cputype in slices and source != slices[cputype][0]:
                continue        # the Python's own slice wins over a wheel's of the same arch
            slices[cputype] = (source, data[offset:offset + size])
    out = scratch / name
    out.write_bytes(codesign.join_universal([image for _, image in slices.values()]))
    os.chmod(out, 0o755)
    return out


def _wheel_backend(wheel: Path, name: str, tag: str) -> bytes:
    if not wheel.is_file():
        raise BundleError(f"--cffi-wheel {wheel} is not a file")
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            if name not in names:
                found = ", ".join(n for n in names if n.startswith("_cffi_backend"))
                raise BundleError(f"--cffi-wheel {wheel.name} holds {found or 'no backend'}; "
                                  f"the bundled Python needs {name} (a cffi wheel for {tag}, "
                                  "macOS)")
            return zf.read(name)
    except zipfile.BadZipFile:
        raise BundleError(f"--cffi-wheel {wheel} is not a wheel (not a zip file); accepts a "
                          "cffi macOS wheel from PyPI") from None
