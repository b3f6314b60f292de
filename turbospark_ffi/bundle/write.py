"""Writing a bundle: measure what the library imports, copy exactly that
(standard library zipped as .pyc, extension modules, libpython, cffi's
backend, this package), make every binary load from the bundle, add the C
side, and check what can be checked. Written beside the target and renamed
into place, so a failure leaves nothing half-done.

Which layout is written follows the library given: an ELF library gets the
Linux layout below (rpaths rewritten to `$ORIGIN` by bundle/elf.py, and the
bundle alone must give the same answers); a Mach-O library gets the macOS
layout of bundle/macos.py (install names rewritten by bundle/macho.py). The
steps both share -- measuring the imports, choosing and zipping the standard
library, this package -- are here, once.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from . import macos
from .common import BundleError, blank_build_paths
from .elf import elf_dynamic, is_elf, set_rpath_origin, strip_elf
from .macho import is_macho
from .probe import header_constants, probe_calls, run_probe

__all__ = ["BundleInfo", "MacOptions", "write_bundle", "MARKER"]

MARKER = "turbospark_bundle.txt"
# Where an earlier bundle's marker is, in either layout (--force replaces only a bundle).
_MARKERS = (f"python/{MARKER}",
            f"{macos.FRAMEWORK_NAME}.xcframework/*/{macos.FRAMEWORK_NAME}.framework/Versions/A/"
            f"Resources/{macos.APP_DIRNAME}/{MARKER}")
MODULE_NAME = "Tsffi"
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


@dataclass(frozen=True)
class MacOptions:
    """What only the macOS layout takes: the framework's CFBundleIdentifier
    (reverse DNS), cffi macOS wheels whose backends are joined with the
    Python's own into a universal one, and whether to write the release zip
    (Tsffi.xcframework.zip, its links kept) and print its checksum."""
    bundle_id: str = macos.DEFAULT_BUNDLE_ID
    cffi_wheels: tuple[str, ...] = ()
    release_zip: bool = False

    def given(self) -> list[str]:
        """The options given that differ from the defaults, as spelled on the command line."""
        return [flag for flag, on in (("--bundle-id", self.bundle_id != macos.DEFAULT_BUNDLE_ID),
                                      ("--cffi-wheel", bool(self.cffi_wheels)),
                                      ("--release-zip", self.release_zip)) if on]


@dataclass
class BundleInfo:
    root: Path
    total_bytes: int = 0
    parts: list = field(default_factory=list)      # [(label, bytes)], largest first
    stdlib_modules: list = field(default_factory=list)
    extension_modules: list = field(default_factory=list)
    stripped_bytes: int = 0
    system_libs: list = field(default_factory=list)  # needed from the system, beyond glibc
    system_base: str = "glibc"                       # what every target system has
    notes: list = field(default_factory=list)        # lines printed after the sizes

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
        lines.append(f"  needs from the system: {self.system_base}"
                     f"{', ' + needs if needs else ''}")
        lines += self.notes
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
    bundled = {p.name for p in root.rglob("*") if p.is_file() and is_elf(p)}
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
    from .. import native
    out = []
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if not path.is_file() or "__pycache__" in rel.parts or rel.parts[0] == "include":
            continue
        if path.name.startswith(f"lib{native.LINK_NAME}") or \
                path.suffix in (".pyc", ".so", ".dylib", ".tmp", ".o"):
            continue
        out.append(path)
    return out


def write_bundle(out_dir: str | os.PathLike, *, force: bool = False, verify: bool = True,
                 library: str | os.PathLike | None = None,
                 python_home: str | os.PathLike | None = None,
                 mac: MacOptions | None = None) -> BundleInfo:
    """Write the bundle to `out_dir` (which must not exist, or be empty, or --
    with `force` -- be an earlier bundle, which is replaced). Written beside
    it first and renamed into place, so a failure leaves nothing half-done.

    `library`: the C library to bundle (default: this package's own build);
    an ELF one gets the Linux layout, a Mach-O one the macOS layout.
    `python_home`: the Python to bundle (default: the one running this); for
    a macOS layout, a macOS Python's prefix or a framework's Versions/X.Y.
    `verify`: load the written bundle and compare its answers (the Linux
    layout only: a macOS bundle is loaded first inside the signed app).
    `mac`: the macOS layout's own choices (MacOptions); refused for ELF."""
    out = _checked_target(out_dir, force)
    package, own, library, header = _checked_inputs(library)
    write = _layout_writer(package, own, library, header, python_home, verify,
                           mac or MacOptions())

    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    scratch = Path(tempfile.mkdtemp(prefix="turbospark-bundle-"))
    try:
        info = write(work, scratch)
        _loadable_by_everyone(work)
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


def _loadable_by_everyone(root: Path) -> None:
    """Modes an app's other users can load: directories 0755, files 0755 when
    executable by their owner (libraries, scripts) else 0644. mkdtemp made
    `root` 0700 (another user of the machine could not load the bundle), and
    a umask like 077 narrows every file written inside; a bundle is shipped,
    so its modes must not depend on either. Symbolic links have no mode of
    their own to set."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        if path.is_dir():
            os.chmod(path, 0o755)
        else:
            os.chmod(path, 0o755 if path.stat().st_mode & 0o100 else 0o644)


def _checked_target(out_dir: str | os.PathLike, force: bool) -> Path:
    """The folder to write: absent, empty, or (with `force`) an earlier bundle."""
    out = Path(out_dir).absolute()
    if out.exists():
        if not out.is_dir():
            raise BundleError(f"{out} exists and is not a directory")
        if any(out.iterdir()):
            if not force:
                raise BundleError(f"{out} exists and is not empty (--force replaces an "
                                  "earlier bundle)")
            if not any(p.is_file() for marker in _MARKERS for p in out.glob(marker)):
                raise BundleError(f"{out} is not a bundle; refusing to replace it")
    return out


def _checked_inputs(library: str | os.PathLike | None) -> tuple[Path, Path, Path, Path]:
    """This package's folder, its own library, the library to bundle, the header."""
    from .. import native

    package = Path(native.package_dir())
    own = Path(native.library_path())
    header = Path(native.include_dir()) / native.HEADER_NAME
    if library is None:
        library = own
        if not library.is_file():
            raise BundleError(f"the library is not built ({library}); run: python ffi_build.py")
    library = Path(library).absolute()
    if not library.is_file():
        raise BundleError(f"--library {library} is not a file")
    if not header.is_file():
        header = package.parent / "include" / native.HEADER_NAME
        if not header.is_file():
            raise BundleError(f"the header {native.HEADER_NAME} is not in {native.include_dir()}")

    return package, own, library, header


def _layout_writer(package: Path, own: Path, library: Path, header: Path,
                   python_home: str | os.PathLike | None, verify: bool, options: MacOptions):
    """The function that writes the layout the library's format asks for."""
    if is_elf(library) and options.given():
        raise BundleError(f"{options.given()[0]} is for a Mach-O (macOS) library's "
                          f"XCFramework; {library.name} is ELF (Linux)")
    if is_elf(library):
        if sys.platform != "linux":
            raise BundleError(f"{library.name} is an ELF (Linux) library: write its bundle on "
                              "Linux")
        if python_home is not None and \
                Path(python_home).resolve() != Path(sys.base_prefix).resolve():
            raise BundleError(f"--python-home {python_home}: a Linux bundle carries the Python "
                              f"running this command ({sys.base_prefix}); run the command with "
                              "that Python instead")
        sources = _linux_sources(package, library, header)

        def write(work: Path, scratch: Path) -> BundleInfo:
            return _write(work, sources=sources, scratch=scratch, verify=verify)
    elif is_macho(library):
        if python_home is None:
            if sys.platform != "darwin":
                raise BundleError(f"{library.name} is a Mach-O (macOS) library and this Python "
                                  f"({sys.executable}) is not a macOS one: pass --python-home "
                                  "with the macOS Python to bundle (a prefix, or a framework's "
                                  "Versions/X.Y)")
            python_home = sys.base_prefix
        macos.check_bundle_id(options.bundle_id)
        mac = macos.find_python(python_home, backend_from_wheels=bool(options.cffi_wheels))
        macos.check_library(library, mac)
        # The package and header come from here; the standard library's
        # choice is declared (bundle/runtime.py), so nothing is run.
        probe_sources = _running_python(package, own, header, libpython=None)

        def write(work: Path, scratch: Path) -> BundleInfo:
            return _write_macos(work, library=library, mac=mac, probe_sources=probe_sources,
                                scratch=scratch, options=options)
    else:
        raise BundleError(f"{library} is neither an ELF (Linux) nor a Mach-O (macOS) library")
    return write


def _running_python(package: Path, library: Path, header: Path,
                    libpython: Path | None) -> _Sources:
    """The running Python's pieces, with `library` as the library."""
    spec = importlib.util.find_spec("_cffi_backend")
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        raise BundleError("cffi is not installed in this Python (its _cffi_backend is "
                          "missing); pip install cffi")
    stdlib = Path(sysconfig.get_path("stdlib"))
    dynload = stdlib / "lib-dynload"
    if not dynload.is_dir():
        dynload = Path(sysconfig.get_config_var("DESTSHARED") or dynload)
    return _Sources(package=package, library=library, header=header, libpython=libpython,
                    cffi_backend=Path(spec.origin), stdlib=stdlib, dynload=dynload)


def _linux_sources(package: Path, library: Path, header: Path) -> _Sources:
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
    return _running_python(package, library, header, libpython)


class _Sources:
    """Where the running Python's pieces are: what a bundle copies from."""

    def __init__(self, *, package: Path, library: Path, header: Path, libpython: Path | None,
                 cffi_backend: Path, stdlib: Path, dynload: Path) -> None:
        self.package, self.library, self.header = package, library, header
        self.libpython, self.cffi_backend = libpython, cffi_backend
        self.stdlib, self.dynload = stdlib, dynload


class _Layout:
    """Where each piece goes inside the bundle being written at `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "python"
        self.site = self.home / "site-packages"
        self.stdlib = self.home / "lib" / PYTHON_DIRNAME
        self.dynload = self.stdlib / "lib-dynload"
        self.stdlib_zip = self.home / STDLIB_ZIP_NAME
        self.package = self.site / "turbospark_ffi"

    def make_dirs(self) -> None:
        for d in (self.root / "lib" / "pkgconfig", self.root / "include", self.site,
                  self.dynload):
            d.mkdir(parents=True, exist_ok=True)


def _write(root: Path, *, sources: _Sources, scratch: Path, verify: bool) -> BundleInfo:
    """The steps, in order; each is one function below."""
    info = BundleInfo(root=root)
    layout = _Layout(root)
    layout.make_dirs()
    calls = probe_calls(sources.package / "samples", scratch)
    whole = _whole_package_modules(sources.stdlib)
    results, modules = _measure_imports(sources, calls, whole, scratch / "p1")       # 1
    std_files, ext_files = _modules_to_bundle(modules, sources)
    info.stdlib_modules, info.extension_modules = sorted(std_files), sorted(ext_files)
    elf_sources = _write_stdlib(layout, sources, std_files, ext_files, info)          # 2
    elf_sources.update(_write_binaries(layout, sources, info))                        # 3
    _check_dependencies(root, elf_sources, info)
    _write_package(layout, sources)                                                   # 4
    _write_c_side(layout, sources, info)                                              # 5
    if verify:
        _verify_alone(layout, sources, calls, whole, results, modules, scratch / "p2")  # 6
    _measure_space(layout, sources, info, len(ext_files))                             # 7
    return info


def _whole_package_modules(stdlib: Path) -> list[str]:
    return sorted({f"{pkg}.{p.stem}" for pkg in _WHOLE_PACKAGES
                   for p in (stdlib / pkg).glob("*.py") if p.stem != "__init__"}
                  - _CODEC_DEPS_NOT_PULLED)


def _measure_imports(sources: _Sources, calls: list, whole: list[str],
                     scratch: Path) -> tuple[list[str], dict[str, str]]:
    """1. What the Python side imports, measured."""
    scratch.mkdir()
    return run_probe(sys.executable, calls, str(sources.library),
                     [str(sources.package.parent), str(sources.stdlib), str(sources.dynload),
                      str(sources.cffi_backend.parent)], scratch, whole)


def _modules_to_bundle(modules: dict[str, str],
                       sources: _Sources) -> tuple[dict[str, Path], dict[str, Path]]:
    """The probe's modules sorted into standard-library sources and extension
    modules; anything else is refused."""
    std_files: dict[str, Path] = {}
    ext_files: dict[str, Path] = {}
    stdlib, dynload = sources.stdlib, sources.dynload
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
        elif _within(origin, str(dynload)):
            ext_files[name] = Path(origin)
        elif _within(origin, str(stdlib)) and origin.endswith(".py"):
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
    return std_files, ext_files


def _write_stdlib(layout: _Layout, sources: _Sources, std_files: dict[str, Path],
                  ext_files: dict[str, Path], info: BundleInfo) -> dict[Path, Path]:
    """2. The standard library, zipped as .pyc (nothing compiles at start-up),
    and the extension modules it loads."""
    _zip_stdlib(layout.stdlib_zip, sources.stdlib, std_files)
    elf_sources = {}
    for name, src in sorted(ext_files.items()):
        dst = layout.dynload / src.name
        _copy_elf(src, dst, info)
        elf_sources[dst] = src
    return elf_sources


def _zip_stdlib(zip_path: Path, stdlib: Path, std_files: dict[str, Path]) -> None:
    """The standard-library modules `std_files` (from `stdlib`) as sourceless
    .pyc in a zip (ZIP_STORED: imported without inflating)."""
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_STORED) as zf:
        for name in sorted(std_files):
            src = std_files[name]
            rel = src.relative_to(stdlib).as_posix()
            code = compile(src.read_bytes(), f"{zip_path.name}/{rel}", "exec",
                           dont_inherit=True)
            entry = zipfile.ZipInfo(rel[:-3] + ".pyc", date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_STORED
            zf.writestr(entry, _pyc(code))


def _write_binaries(layout: _Layout, sources: _Sources, info: BundleInfo) -> dict[Path, Path]:
    """3. The library (its build paths blanked), libpython and cffi's backend."""
    elf_sources = {}
    for src, dst in ((sources.library, layout.root / "lib" / sources.library.name),
                     (sources.libpython, layout.root / "lib" / sources.libpython.name),
                     (sources.cffi_backend, layout.site / sources.cffi_backend.name)):
        _copy_elf(src, dst, info)
        elf_sources[dst] = src
    blank_build_paths(layout.root / "lib" / sources.library.name)
    return elf_sources


def _write_package(layout: _Layout, sources: _Sources, keep=None) -> None:
    """4. This package: its files (the sample installs too, so that a bundle
    can demo itself; `keep(rel)` chooses fewer) and checked-hash .pyc beside
    them, which stay valid however the bundle is copied (a timestamp .pyc
    would not)."""
    import py_compile
    for src in _package_sources(sources.package):
        rel = src.relative_to(sources.package)
        if keep is not None and not keep(rel):
            continue
        dst = layout.package / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        if dst.suffix == ".py":
            py_compile.compile(str(dst), dfile=f"turbospark_ffi/{rel.as_posix()}", doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)


def _write_c_side(layout: _Layout, sources: _Sources, info: BundleInfo) -> None:
    """5. The C side: header, module map, pkg-config, marker."""
    from .. import native
    root = layout.root
    shutil.copyfile(sources.header, root / "include" / native.HEADER_NAME)
    (root / "module.modulemap").write_text(
        f"module {MODULE_NAME} {{\n"
        f'    header "include/{native.HEADER_NAME}"\n'
        f'    link "{native.LINK_NAME}"\n'
        "    export *\n"
        "}\n")
    (root / "lib" / "pkgconfig" / f"{native.PKG_CONFIG_NAME}.pc").write_text(
        native.pkg_config(prefix="${pcfiledir}/../.."))
    _write_marker(layout.home / MARKER, sources.header, info,
                  "the library beside this folder (../lib) starts its\n"
                  "embedded Python with this folder as its home and nothing outside it.",
                  python='%d.%d.%d' % sys.version_info[:3], platform=sysconfig.get_platform(),
                  soabi=sysconfig.get_config_var('SOABI'), stdlib_zip=STDLIB_ZIP_NAME)


def _write_marker(path: Path, header: Path, info: BundleInfo, what: str, *, python: str,
                  platform: str, soabi: str, stdlib_zip: str) -> None:
    from .. import __version__
    abi = header_constants(header).get("TSFFI_ABI_VERSION")
    path.write_text(
        f"turbospark_ffi bundle: {what}\n"
        "format: 1\n"
        f"version: {__version__}\n"
        f"abi: {abi}\n"
        f"python: {python}\n"
        f"platform: {platform}\n"
        f"soabi: {soabi}\n"
        f"stdlib: {stdlib_zip} ({len(info.stdlib_modules)} modules)\n"
        f"extension modules: {' '.join(info.extension_modules)}\n")


def _verify_alone(layout: _Layout, sources: _Sources, calls: list, whole: list[str],
                  results: list[str], modules: dict[str, str], scratch: Path) -> None:
    """6. The same answers from the bundle alone, and nothing imported from
    outside it."""
    scratch.mkdir()
    root = str(layout.root)
    again, seen = run_probe(sys.executable, calls, str(layout.root / "lib" / sources.library.name),
                            [str(layout.site), str(layout.stdlib_zip), str(layout.stdlib),
                             str(layout.dynload)], scratch, whole)
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
                not _within(origin, root):
            raise BundleError(f"with only the bundle on sys.path, {name} was imported "
                              f"from {origin}")
        if name.split(".")[0] in ("turbospark_ffi", "_cffi_backend",
                                  "_turbospark_ffi_embedded") and origin and \
                not _within(origin, root):
            raise BundleError(f"{name} was imported from {origin}, not the bundle")


def _measure_space(layout: _Layout, sources: _Sources, info: BundleInfo,
                   extension_count: int) -> None:
    """7. What takes the space."""
    info.total_bytes = _tree_size(layout.root)
    lib = layout.root / "lib"
    parts = [("lib/" + sources.libpython.name, lib / sources.libpython.name),
             ("lib/" + sources.library.name, lib / sources.library.name),
             (f"python/{STDLIB_ZIP_NAME} (standard library)", layout.stdlib_zip),
             (f"python/lib/{PYTHON_DIRNAME}/lib-dynload ({extension_count} modules)",
              layout.dynload),
             ("python/site-packages/" + sources.cffi_backend.name,
              layout.site / sources.cffi_backend.name),
             ("python/site-packages/turbospark_ffi/samples", layout.package / "samples")]
    sizes = [(label, _tree_size(p)) for label, p in parts if p.exists()]
    samples = layout.package / "samples"
    pkg_size = _tree_size(layout.package) - (_tree_size(samples) if samples.exists() else 0)
    sizes.append(("python/site-packages/turbospark_ffi (.py + .pyc)", pkg_size))
    sizes.append(("everything else", info.total_bytes - sum(s for _, s in sizes)))
    info.parts = sorted(sizes, key=lambda x: -x[1])


# ---------------------------------------------------------------------------
# The macOS layout (bundle/macos.py says where each piece goes and why).

def _write_macos(root: Path, *, library: Path, mac: macos.MacPython, probe_sources: _Sources,
                 scratch: Path, options: MacOptions) -> BundleInfo:
    """The same measured choice of modules as the Linux layout, placed in
    Tsffi.xcframework's one framework (bundle/macos.py says where and why),
    every Mach-O file rewritten to load from there and signed ad hoc; the
    runtime of the package only (bundle/runtime.py); then sign.sh and its
    file lists, and the release zip when asked."""
    from .. import __version__
    from . import release, runtime
    info = BundleInfo(root=root, system_base="libSystem")
    layout = macos.MacLayout(root, mac.version, macos.library_archs(library))
    layout.make_dirs()
    std_files = runtime.stdlib_files(mac.stdlib)
    ext_files = _target_extensions(runtime.EXTENSION_MODULES, mac)
    info.stdlib_modules, info.extension_modules = sorted(std_files), sorted(ext_files)
    _zip_stdlib(layout.stdlib_zip, mac.stdlib, std_files)
    tag = f"cpython-{mac.version.replace('.', '')}-darwin"
    backend = release.join_backend(mac.cffi_backend, [Path(w) for w in options.cffi_wheels],
                                   tag, scratch) if options.cffi_wheels else None
    files, info.stripped_bytes, info.system_libs, kept = macos.write_binaries(
        layout, library, mac, ext_files, bundle_id=options.bundle_id, backend=backend)
    _write_package(layout, probe_sources, keep=runtime.is_runtime_file)
    macos.write_framework_files(layout, header=probe_sources.header, version=__version__,
                                bundle_id=options.bundle_id)
    _write_marker(layout.home / MARKER, probe_sources.header, info,
                  f"the framework's binary (../../{macos.FRAMEWORK_NAME}) starts its "
                  "embedded\nPython with this folder as its home, ../../Frameworks for its "
                  "extension\nmodules, and nothing outside the framework.",
                  python=mac.version, platform="macos", soabi=tag,
                  stdlib_zip=layout.stdlib_zip.name)
    macos.write_sign_script(layout, files)
    _macos_sizes(info, layout, mac, len(ext_files))
    info.notes.append(f"  Mach-O files ({len(files)}): each loads from the framework and is "
                      "signed ad hoc after its last edit"
                      + (f" ({', '.join(kept)} kept the vendor's signature)" if kept else "")
                      + "; the app's Run Script phase re-signs them with its identity: sign.sh "
                      "after Xcode embeds the framework (docs/shipping.md)")
    info.notes.append("  load check: NOT RUN: the library is Mach-O (macOS); this command "
                      "loads only a Linux bundle to compare its answers; a macOS bundle is "
                      "first loaded by the signed app")
    if options.release_zip:
        archive = root / f"{macos.FRAMEWORK_NAME}.xcframework.zip"
        digest = release.write_release_zip(layout.xcframework, archive)
        (root / f"{archive.name}.sha256").write_text(f"{digest}  {archive.name}\n")
        info.notes.append(f"  release zip: {archive.name} ({_mb(archive.stat().st_size)}, "
                          f"links kept); checksum: {digest}")
    return info


def _macos_sizes(info: BundleInfo, layout: macos.MacLayout, mac: macos.MacPython,
                 extension_count: int) -> None:
    """What takes the space, by the framework's parts."""
    info.total_bytes = _tree_size(layout.root)
    rel = f"{macos.FRAMEWORK_NAME}.framework/Versions/A"
    parts = [(f"{rel}/Frameworks/{layout.libpython.name}", layout.libpython),
             (f"{rel}/{macos.FRAMEWORK_NAME} (libtsffi)", layout.library),
             (f"{rel}/Resources/{macos.APP_DIRNAME}/{layout.stdlib_zip.name} (standard library)",
              layout.stdlib_zip),
             (f"{rel}/Frameworks/{mac.cffi_backend.name}",
              layout.backend_dir / mac.cffi_backend.name)]
    sizes = [(label, _tree_size(p)) for label, p in parts if p.exists()]
    ext = sum(_tree_size(p) for p in layout.code.glob("*.so") if p.name != mac.cffi_backend.name)
    sizes.append((f"{rel}/Frameworks: {extension_count} extension modules", ext))
    sizes.append((f"{rel}/Resources/{macos.APP_DIRNAME}/site-packages/turbospark_ffi "
                  "(.py + .pyc)", _tree_size(layout.package)))
    sizes.append(("everything else", info.total_bytes - sum(size for _, size in sizes)))
    info.parts = sorted(sizes, key=lambda x: -x[1])


def _target_extensions(names: tuple[str, ...], mac: macos.MacPython) -> dict[str, Path]:
    """The declared extension modules as files of the Python being bundled
    (its lib-dynload). A module that Python compiled into its library is
    skipped; anything else missing is an error."""
    ext: dict[str, Path] = {}
    tag = f"cpython-{mac.version.replace('.', '')}-darwin"
    for name in names:
        found = sorted(mac.dynload.glob(f"{name}.{tag}.so")) or \
            sorted(mac.dynload.glob(f"{name}.so"))
        if found:
            ext[name] = found[0]
        elif not macos.builtin_in(mac, name):
            raise BundleError(f"the library loads the extension module {name}, which the "
                              f"Python at {mac.home} has neither in {mac.dynload} nor "
                              f"compiled in (its library exports no PyInit_{name})")
    return ext
