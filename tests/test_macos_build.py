"""The macOS build, checked from Linux: the generated C cross-compiled for
arm64 and x86_64 macOS, linked with build.json's exact arguments by zig and by
ld64.lld (the strict one), for three described Pythons (python.org's and
Homebrew's framework builds, python-build-standalone), and read back
(tests/macos_cross.py does the work). What this cannot check -- dyld loading
the result, the interpreter starting on a real framework, signing -- README's
"macOS" section says.

Every check is also shown to fail where it should: against the link
arguments c98e222's ffi_build.py gave on a Mac (transcribed below, and
confirmed by running that file with sys.platform and sysconfig answering as the
described Python), and against purposely broken links for the checks those
arguments happened to pass.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import macos_cross as mc
from macos_cross import ARCHS, INSTALL_NAME, LINKERS, PYTHONS

ROOT = Path(__file__).resolve().parent.parent
HEADER_EXPORTS = mc.expected_exports()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("macos")


def _prepared(work: Path, python: str, arch: str):
    return mc.prepare(work, arch, python)


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("python", PYTHONS)
def test_the_library_follows_apples_rules(work, python, arch, linker):
    """id @rpath/libtsffi.dylib; LC_RPATHs @loader_path then the Python's
    LIBDIR, one path each; exports exactly the header's functions and cffi's
    PyInit; loads only libSystem and the Python it was built for; two-level
    namespace; and a host linked per `turbospark-ffi config --libs` records
    @rpath/libtsffi.dylib."""
    spec, obj, root = _prepared(work, python, arch)
    library = mc.link_library(spec, obj, arch, linker, root)
    assert mc.check_library(library, python, spec, linker) == []
    commands = mc.load_commands(library)
    assert commands["id"] == [INSTALL_NAME]
    assert sorted(commands["load"]) == sorted(
        [mc.described_python(python)["libpython_install_name"], mc.SYSTEM_LIBRARY])
    extra = set(mc.ZIG_SYNTHESIZED) if linker == "zig" else set()
    assert set(mc.exported_symbols(library)) - extra == set(HEADER_EXPORTS)
    host = mc.linked_host_loads(work / python, library, arch, linker)
    assert INSTALL_NAME in host["load"]
    assert host["rpath"] == [str(work / python / f"host-{linker}-{arch}" / "package")]


def test_both_slices_combine_into_a_universal_library(work):
    universal = mc.cross_build_universal(work, "python.org")
    assert mc.lipo_archs(universal) == sorted(ARCHS)
    lief = mc.lief_module()
    fat = lief.MachO.parse(str(universal))
    assert fat.size == 2
    assert mc.check_library(universal, "python.org", mc.emit(work / "u", "python.org"),
                            "lld") == []


def test_build_json_for_python_org(tmp_path):
    """The whole of build.json's flags for python.org's framework Python,
    written out."""
    spec = mc.emit(tmp_path, "python.org")
    fw = "/Library/Frameworks/Python.framework/Versions/3.11"
    assert spec["include_dirs"] == [str(ROOT / "include"), f"{fw}/include/python3.11"]
    assert spec["libraries"] == ["python3.11"]
    assert spec["library_dirs"] == [f"{fw}/lib"]
    assert spec["extra_compile_args"] == ["-O2", "-g0", "-Wall", "-Wno-unused-function"]
    assert spec["extra_link_args"] == [
        "-Wl,-install_name,@rpath/libtsffi.dylib",
        "-Wl,-rpath,@loader_path",
        f"-Wl,-rpath,{fw}/lib",
        "-Wl,-headerpad_max_install_names",
        f"-Wl,-exported_symbols_list,{tmp_path / 'exports.txt'}",
    ]
    assert sorted((tmp_path / "exports.txt").read_text().split()) == HEADER_EXPORTS
    assert spec["output"] == str(tmp_path / "libtsffi.dylib")
    assert spec["sources"] == [str(tmp_path / "_turbospark_ffi_embedded.c")]
    assert Path(spec["sources"][0]).read_text().count("tsffi_py_init_status") > 0
    assert spec["archs"] == ["arm64", "x86_64"]  # python.org's CFLAGS: universal2
    defines = dict(spec["define_macros"])
    assert defines["TSFFI_BUILD_PYTHON_HOME"] == f'"{fw}"'
    assert defines["TSFFI_BUILD_LIBPYTHON_DIR"] == f'"{fw}"'
    assert defines["TSFFI_BUILD_STDLIB_FROM_LIBPYTHON"] == '"lib/python3.11"'
    assert defines["TSFFI_BUILD_FRAMEWORK_NAME"] == '"Python"'


@pytest.mark.parametrize("python", PYTHONS)
def test_no_elf_only_option_on_darwin(tmp_path, python):
    spec = mc.emit(tmp_path, python)
    words = " ".join(spec["extra_link_args"] + spec["extra_compile_args"])
    for elf_only in ("-z,", "--version-script", "-Bsymbolic", "$ORIGIN", "-soname",
                     "format-truncation"):
        assert elf_only not in words, (python, elf_only)
    assert spec["libraries"] == ["python3.11"]  # no -ldl/-lpthread: both are libSystem


# ARCHFLAGS, as `ARCHFLAGS="-arch arm64 -arch x86_64" pip install .` sets it,
# decides the slices setuptools builds; unset, the Python's own CFLAGS do.
ARCHFLAGS_CASES = [
    ("homebrew", None, []),
    ("homebrew", "-arch arm64 -arch x86_64", ["arm64", "x86_64"]),
    ("python.org", None, ["arm64", "x86_64"]),
    ("python.org", "-arch x86_64", ["x86_64"]),
]


@pytest.mark.parametrize("python,archflags,archs", ARCHFLAGS_CASES)
def test_archflags_choose_the_slices(tmp_path, python, archflags, archs):
    environ = {} if archflags is None else {"ARCHFLAGS": archflags}
    assert mc.emit(tmp_path, python, environ)["archs"] == archs


def _ffi_build(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "ffi_build.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_a_static_python_is_refused_naming_both_fixes(tmp_path):
    config = mc.described_python_path("pyenv-static")
    done = _ffi_build("--emit-c", tmp_path, "--platform", "darwin", "--python-config", config)
    assert done.returncode == 1
    assert done.stderr == (
        f"ffi_build: this Python ({config}) cannot host an embedded interpreter: it has no "
        "shared libpython (Py_ENABLE_SHARED = 0) and is not a framework build "
        "(PYTHONFRAMEWORK is empty), so there is no libpython for the library to link and "
        "load; its libpython is static (pyenv's default build is). Use a Python configured "
        "with --enable-shared or, on macOS, --enable-framework (pyenv: "
        "PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install 3.11, or "
        "PYTHON_CONFIGURE_OPTS=--enable-framework; python.org's and Homebrew's Pythons are "
        "framework builds; Debian: libpython3.11-dev), and build with that one.\n")
    assert not (tmp_path / "build.json").exists()


def _config(tmp_path: Path, data) -> Path:
    path = tmp_path / "python.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _without_var(name: str) -> dict:
    data = mc.described_python("homebrew")
    del data["vars"][name]
    return data


BAD_CONFIGS = [
    # not JSON at all
    ("{vars", "darwin", "cannot read it as JSON (Expecting property name enclosed in double "
                        "quotes: line 1 column 2 (char 1)); accepts the JSON object the "
                        "sysconfig one-liner in ffi_build.py prints"),
    # a list, not the object
    ("[]", "darwin", 'got a JSON list; accepts an object with "vars", "paths" and '
                     '"base_prefix"'),
    # "paths" missing
    ({"vars": {}, "base_prefix": "/x"}, "darwin",
     "'paths' is missing or not a JSON object (got NoneType); accepts the object the "
     "sysconfig one-liner in ffi_build.py prints"),
]


@pytest.mark.parametrize("data,platform,message", BAD_CONFIGS)
def test_error_an_unreadable_python_config(tmp_path, data, platform, message):
    config = _config(tmp_path, data)
    done = _ffi_build("--emit-c", tmp_path / "out", "--platform", platform,
                      "--python-config", config)
    assert done.returncode == 1
    assert done.stderr == f"ffi_build: --python-config {config}: {message}\n"


DESCRIPTION_ERRORS = [
    # the build reads LIBDIR
    (_without_var("LIBDIR"), "darwin",
     "has no sysconfig variable LIBDIR (the build needs VERSION, MACHDEP, LIBDIR, INCLUDEPY)"),
    # a macOS Python described for a Linux build
    (mc.described_python("homebrew"), "linux",
     "is a darwin Python (MACHDEP = 'darwin'); --platform linux needs a non-darwin one"),
]


@pytest.mark.parametrize("data,platform,message", DESCRIPTION_ERRORS)
def test_error_a_description_the_build_cannot_use(tmp_path, data, platform, message):
    config = _config(tmp_path, data)
    done = _ffi_build("--emit-c", tmp_path / "out", "--platform", platform,
                      "--python-config", config)
    assert done.returncode == 1
    assert done.stderr == f"ffi_build: the Python described by {config} {message}\n"


def test_build_json_for_this_python(tmp_path):
    """The in-place build's flags for the running Python. On Linux they are
    c98e222's (plus what setuptools added itself: -I INCLUDEPY and -L LIBDIR,
    now listed), and the .so built from the same C was byte-for-byte the same
    when this landed; on macOS, Apple's."""
    import sysconfig
    import ffi_build
    platform = ffi_build.host_platform()
    done = _ffi_build("--emit-c", tmp_path)
    assert done.returncode == 0, done.stderr
    spec = json.loads((tmp_path / "build.json").read_text())
    libdir = sysconfig.get_config_var("LIBDIR")
    pythonlib = f"python{sysconfig.get_config_var('VERSION')}{sys.abiflags}"
    assert spec["library_dirs"] == [libdir]
    if platform == "linux":
        assert spec["libraries"] == ["dl", "pthread", pythonlib]
        assert spec["extra_compile_args"] == ["-O2", "-g0", "-Wall", "-Wno-unused-function",
                                              "-Wno-format-truncation"]
        assert spec["extra_link_args"] == [f"-Wl,-rpath,$ORIGIN:{libdir}", "-Wl,-z,nodelete",
                                           f"-Wl,--version-script={tmp_path / 'exports.map'}",
                                           "-Wl,-Bsymbolic-functions"]
        assert spec["output"] == str(tmp_path / "libtsffi.so") and spec["archs"] == []
    else:
        assert spec["libraries"] == [pythonlib]
        assert spec["extra_link_args"][:4] == [
            "-Wl,-install_name,@rpath/libtsffi.dylib", "-Wl,-rpath,@loader_path",
            f"-Wl,-rpath,{libdir}", "-Wl,-headerpad_max_install_names"]
        assert spec["output"] == str(tmp_path / "libtsffi.dylib")


# --------------------------------------------------------------------------
# The checks fail where they should.

def c98e222_darwin_spec(python: str, spec: dict) -> dict:
    """What c98e222's ffi_build.py passed on a Mac for the described Python,
    with what setuptools adds (-L LIBDIR only when Py_ENABLE_SHARED is set):
    ELF's compile and link arguments, one `@loader_path:LIBDIR` rpath,
    `-z nodelete`, no install name, no export list."""
    described = mc.described_python(python)["vars"]
    old = copy.deepcopy(spec)
    old["libraries"] = ["dl", "pthread", f"python{described['VERSION']}"]
    old["library_dirs"] = [described["LIBDIR"]] if described["Py_ENABLE_SHARED"] else []
    old["extra_compile_args"] = ["-O2", "-g0", "-Wall", "-Wno-unused-function",
                                 "-Wno-format-truncation"]
    old["extra_link_args"] = [f"-Wl,-rpath,@loader_path:{described['LIBDIR']}", "-Wl,-z,nodelete"]
    return old


LINK_FAILURES = [
    # the strict linker rejects ELF's option
    ("python.org", "lld", "ld64.lld-14: error: unknown argument '-z'"),
    ("standalone", "lld", "ld64.lld-14: error: unknown argument '-z'"),
    # no -L for a framework build: setuptools adds none
    ("python.org", "zig", 'error: unable to find dynamic system library "python3.11" using '
                          "strategy paths_first. searched paths: none"),
    ("homebrew", "zig", 'error: unable to find dynamic system library "python3.11" using '
                        "strategy paths_first. searched paths: none"),
]


@pytest.mark.parametrize("python,linker,error", LINK_FAILURES)
def test_c98e222_flags_do_not_link(work, python, linker, error):
    spec, obj, root = _prepared(work, python, "arm64")
    with pytest.raises(AssertionError) as failed:
        mc.link_library(c98e222_darwin_spec(python, spec), obj, "arm64", linker, root)
    assert error in str(failed.value).replace(mc.ld64_lld(), "ld64.lld-14")


def _problems_with_old_flags(work: Path, python: str, linker: str, fix_link: bool):
    spec, obj, root = _prepared(work, python, "arm64")
    old = c98e222_darwin_spec(python, spec)
    if fix_link:  # the link errors fixed, to reach what follows them
        old["extra_link_args"].remove("-Wl,-z,nodelete")
        old["library_dirs"] = spec["library_dirs"]
    library = mc.link_library(old, obj, "arm64", linker, root)
    return library, mc.check_library(library, python, old, linker)


@pytest.mark.parametrize("python,linker,fix_link", [("standalone", "zig", False),
                                                    ("python.org", "lld", True)])
def test_c98e222_flags_break_the_id_and_the_rpaths(work, python, linker, fix_link):
    library, problems = _problems_with_old_flags(work, python, linker, fix_link)
    libdir = mc.described_python(python)["vars"]["LIBDIR"]
    assert problems == [
        "id: ['./libtsffi.dylib'] (want ['@rpath/libtsffi.dylib'])",
        f"rpath: '@loader_path:{libdir}' is a list, which dyld takes as one path",
        f"rpaths: ['@loader_path:{libdir}'] (want ['@loader_path', '{libdir}'])",
    ]
    # and every host linked the README's way looks for it in its working directory
    host = mc.linked_host_loads(work / f"old-{python}", library, "arm64", linker)
    assert "./libtsffi.dylib" in host["load"] and INSTALL_NAME not in host["load"]


EXTRA_GLOBAL = "int tsffi_not_in_the_header(void) { return 7; }\n"


@pytest.mark.parametrize("with_list", [True, False])
def test_the_export_list_is_what_keeps_other_globals_in(work, tmp_path, with_list):
    """Every other symbol of the generated C is static, so c98e222's link
    exported the same names; a global the header does not declare shows the
    list at work: exported without it, kept in with it."""
    spec, obj, root = _prepared(work, "python.org", "arm64")
    extra = tmp_path / "extra.c"
    extra.write_text(EXTRA_GLOBAL)
    extra_obj = tmp_path / "extra.o"
    subprocess.run([*mc.zig(), "cc", "-target", mc.ZIG_TARGETS["arm64"], "-c", str(extra),
                    "-o", str(extra_obj)], check=True, capture_output=True)
    linked = copy.deepcopy(spec)
    linked["output"] = str(tmp_path / "libtsffi.dylib")
    linked["extra_link_args"] = [str(extra_obj), *(
        a for a in spec["extra_link_args"] if with_list or "exported_symbols_list" not in a)]
    library = mc.link_library(linked, obj, "arm64", "lld", root)
    problems = mc.check_library(library, "python.org", linked, "lld")
    assert problems == ([] if with_list else
                        ["exports 1 names the header does not declare: _tsffi_not_in_the_header"])


BROKEN_LINKS = [
    # a flat-namespace image: symbols looked up in every image, not their own
    (["-flat_namespace"],
     ["not a two-level namespace image (MH_TWOLEVEL unset)"]),
]


@pytest.mark.parametrize("extra_args,expected", BROKEN_LINKS)
def test_the_namespace_check_fails_on_a_flat_image(work, tmp_path, extra_args, expected):
    spec, obj, root = _prepared(work, "python.org", "arm64")
    linked = copy.deepcopy(spec)
    linked["output"] = str(tmp_path / "libtsffi.dylib")
    linked["extra_link_args"] = spec["extra_link_args"] + extra_args
    library = mc.link_library(linked, obj, "arm64", "lld", root)
    problems = mc.check_library(library, "python.org", linked, "lld")
    assert problems[:len(expected)] == expected
    assert problems[len(expected):][0].startswith("binds ")


def test_the_load_command_check_fails_on_another_library(work, tmp_path):
    """A library that is neither a system one, the Python it was built
    for, nor @rpath/ (here: another Python's framework) is named."""
    spec, obj, root = _prepared(work, "python.org", "arm64")
    other = root / "opt" / "other" / "libother.dylib"
    other.parent.mkdir(parents=True, exist_ok=True)
    source = tmp_path / "other.c"
    source.write_text("void other(void) {}\n")
    subprocess.run([*mc.zig(), "cc", "-target", mc.ZIG_TARGETS["arm64"], "-shared", "-o",
                    str(other), str(source), "-Wl,-install_name,/opt/other/libother.dylib"],
                   check=True, capture_output=True)
    linked = copy.deepcopy(spec)
    linked["output"] = str(tmp_path / "libtsffi.dylib")
    linked["library_dirs"] = spec["library_dirs"] + ["/opt/other"]
    linked["libraries"] = spec["libraries"] + ["other"]
    library = mc.link_library(linked, obj, "arm64", "lld", root)
    assert mc.check_library(library, "python.org", linked, "lld") == [
        "loads '/opt/other/libother.dylib': neither a system library, the Python it was built "
        "for (/Library/Frameworks/Python.framework/Versions/3.11/Python), nor @rpath/"]


def test_the_tools_are_installed():
    """The cross-check's tools come from the project's own files: a missing
    one fails here naming how to install it."""
    assert mc.zig() and mc.ld64_lld() and mc.llvm_lipo() and mc.lief_module()
    assert os.access(mc.ld64_lld(), os.X_OK)
