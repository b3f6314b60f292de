"""The floor for cold start: a cffi-embedded library that does nothing.

Built the way ffi_build.py builds the real library -- ffi.embedding_api,
ffi.embedding_init_code, ffi.compile(target="libtrivial.*") with an rpath to
the Python LIBDIR -- but its one Python function returns at once. It exports
the two symbols bench/cold_host.c calls (tsffi_speculation_plan and
tsffi_string_free), so the very same host source links against either library:
what the real library costs beyond this is what the design adds.

Two floors:

* `libtrivial` -- exactly cffi's own embedding start: on the first call cffi
  runs Py_InitializeEx(0), which imports `site` and every .pth file of the
  interpreter's site-packages. That is the floor of a cffi-embedded library
  as cffi makes one, and the one the issue names.
* `libtrivial_isolated` -- the same do-nothing function, but the interpreter
  is started the way src/tsffi_embed.c starts it (PEP 587, isolated, no `site`,
  search path pinned, GIL released) before cffi's start-up runs the init
  code. The real library skips `site` too, so this is the tighter floor:
  the interpreter start that this design cannot go under.
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
from pathlib import Path

EMBEDDING_API = """
int32_t tsffi_speculation_plan(const char *model_dir, const char *options_json, char **out_json);
"""

# Plain C beside the embedded module: freeing a result needs no Python.
C_SOURCE = """
#include <stdlib.h>
__attribute__((visibility("default"))) void tsffi_string_free(char *s) { free(s); }
"""

INIT_CODE = """
from _trivial_embedded import ffi

@ffi.def_extern()
def tsffi_speculation_plan(model_dir, options_json, out_json):
    out_json[0] = ffi.NULL
    return 0
"""


ISOLATED_CDEF = """
extern "Python" int32_t _triv_py(void);
"""

# Mirrors tsffi_embed.c's start (minus the bundle layout and error reporting).
ISOLATED_C_SOURCE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
static int32_t _triv_py(void);
static pthread_once_t triv_once = PTHREAD_ONCE_INIT;
static void triv_append(PyConfig *c, const char *path) {
    wchar_t *w = Py_DecodeLocale(path, NULL);
    PyWideStringList_Append(&c->module_search_paths, w);
    PyMem_RawFree(w);
}
static void triv_start(void) {
    PyConfig config;
    if (Py_IsInitialized()) return;
    PyConfig_InitIsolatedConfig(&config);
    config.install_signal_handlers = 0;
    config.write_bytecode = 0;
    config.site_import = 0;
    config.user_site_directory = 0;
    config.pathconfig_warnings = 0;
    config.parse_argv = 0;
    config.buffered_stdio = 0;
    config.module_search_paths_set = 1;
    PyConfig_SetBytesString(&config, &config.home, TRIV_HOME);
    triv_append(&config, TRIV_STDLIB);
    triv_append(&config, TRIV_DYNLOAD);
    triv_append(&config, TRIV_CFFI_DIR);
    Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    PyEval_SaveThread();
}
__attribute__((visibility("default")))
int32_t tsffi_speculation_plan(const char *model_dir, const char *options_json, char **out_json) {
    (void)model_dir; (void)options_json;
    pthread_once(&triv_once, triv_start);
    *out_json = NULL;
    return _triv_py();
}
__attribute__((visibility("default"))) void tsffi_string_free(char *s) { free(s); }
"""

ISOLATED_INIT_CODE = """
from _trivial_isolated_embedded import ffi

@ffi.def_extern()
def _triv_py():
    return 0
"""


def _c_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_isolated(out_dir: Path, tmpdir: Path) -> Path:
    import os

    import _cffi_backend
    import cffi

    stdlib = sysconfig.get_path("stdlib")
    dynload = os.path.join(stdlib, "lib-dynload")
    if not os.path.isdir(dynload):
        dynload = sysconfig.get_config_var("DESTSHARED") or dynload
    defines = "".join(f"#define {k} {_c_string(v)}\n" for k, v in {
        "TRIV_HOME": sys.base_prefix, "TRIV_STDLIB": stdlib, "TRIV_DYNLOAD": dynload,
        "TRIV_CFFI_DIR": os.path.dirname(os.path.abspath(_cffi_backend.__file__)),
    }.items())
    ffi = cffi.FFI()
    ffi.cdef(ISOLATED_CDEF)
    ffi.embedding_init_code(ISOLATED_INIT_CODE)
    libdir = sysconfig.get_config_var("LIBDIR")
    ffi.set_source("_trivial_isolated_embedded", defines + ISOLATED_C_SOURCE,
                   libraries=["pthread"], extra_compile_args=["-O2"],
                   extra_link_args=[f"-Wl,-rpath,{libdir}"])
    tmpdir.mkdir(parents=True, exist_ok=True)
    built = Path(ffi.compile(tmpdir=str(tmpdir), target="libtrivial_isolated.*"))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / built.name
    shutil.copy2(built, target)
    return target


def build(out_dir: Path, tmpdir: Path) -> Path:
    import cffi

    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        sys.exit("bench: this Python has no shared libpython; cffi embedding needs one")
    ffi = cffi.FFI()
    ffi.embedding_api(EMBEDDING_API)
    ffi.embedding_init_code(INIT_CODE)
    libdir = sysconfig.get_config_var("LIBDIR")
    ffi.set_source("_trivial_embedded", C_SOURCE,
                   extra_compile_args=["-O2"],
                   extra_link_args=[f"-Wl,-rpath,{libdir}"])
    tmpdir.mkdir(parents=True, exist_ok=True)
    built = Path(ffi.compile(tmpdir=str(tmpdir), target="libtrivial.*"))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / built.name
    shutil.copy2(built, target)
    return target
