"""`model_dir` as every entry point takes it: one check of the argument, then
the engine's own resolution of a model NAME into the directory it opens.

The engine's open, its check tool and its server take "a path to a `.gturbo`
directory OR an installed alias" and turn it into a directory by one rule,
stated once in docs/c-api.md ("Model names"; docs/ENGINE.md section 8 says
where the engine applies it). Two of its choices, and why: an existing
DIRECTORY wins whatever its name (a path that silently resolved to an alias
would run a different model than the one named), and a variable set but
empty counts as set (an empty `$TURBOSPARK_HOME` makes the working directory
the store, as it does for the engine).

The answer is an absolute path, so a result can say which directory it read.
An absolute name that is a directory comes back exactly as given (no
normalisation: `a/link/..` is not `a` when `link` is a symlink), which is
also what lets the C warm path key on it (see tsffi_embed.c).

The environment is read through `_getenv`, replaceable by `use_getenv`: in
the library's own interpreter `_abi.bind` hands in the values the library
copied at its first call (tsffi_getenv in src/tsffi_embed.c says why never
the live environment: a host's setenv() racing a getenv() crashed the host);
in a host's interpreter it stays that interpreter's `os.environ`.
"""

from __future__ import annotations

import os

from .errors import InvalidArgument

__all__ = ["absolute_path", "check_model_dir", "resolve_model_name",
           "store_root", "use_getenv", "INSTALLED_JSON", "DEFAULT_INSTALL_PATHS"]

INSTALLED_JSON = "installed.json"
# Relative to the store root, `{}` the name: the engine's default install
# paths, in the order it tries them (the last two are its legacy layout).
DEFAULT_INSTALL_PATHS = ("models/text/{}.gturbo", "models/text/{}.gturbo-vision",
                         "models/{}.gturbo", "models/{}.gturbo-vision")

_getenv = os.environ.get


def use_getenv(getenv) -> None:
    """Read the environment through `getenv(name) -> str | None` from now on."""
    global _getenv
    _getenv = getenv


def check_model_dir(model_dir: str | bytes | os.PathLike) -> str:
    """The `model_dir` argument as text, or InvalidArgument naming what is
    wrong with it. The one check every entry point makes, C and Python alike:
    bytes (what C passes) must be UTF-8, as must a str (a str carrying
    undecodable bytes as surrogates is refused like those bytes); empty is
    refused rather than read as the working directory; a NUL is refused (C
    cannot pass one, and no path holds one)."""
    raw = os.fspath(model_dir) if not isinstance(model_dir, (str, bytes)) else model_dir
    if isinstance(raw, str):
        try:
            data = raw.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise InvalidArgument(
                f"model_dir is not UTF-8 (a lone surrogate U+{ord(raw[exc.start]):04X} at "
                f"offset {exc.start}); accepts UTF-8 text") from None
    elif isinstance(raw, bytes):
        data = raw
    else:  # os.fspath returned something else (a broken __fspath__)
        raise TypeError(f"model_dir must be a str, bytes or os.PathLike, got "
                        f"{type(model_dir).__name__}")
    if not data:
        raise InvalidArgument("model_dir is empty; accepts the path of an install directory "
                              "or an installed alias (an empty path is not read as the "
                              "current directory)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(
            f"model_dir is not UTF-8 (invalid byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); accepts UTF-8 text") from None
    nul = text.find("\x00")
    if nul >= 0:
        raise InvalidArgument(f"model_dir contains a NUL character (at offset {nul}); accepts "
                              "a path or an alias without NUL characters")
    return text


def _is_dir(path: str) -> bool:
    return os.path.isdir(path)  # False on any error, as the engine's is_dir()


def absolute_path(path: str, what: str = "model_dir") -> str:
    """`path` made absolute against the working directory as resolution makes
    it (an absolute path as given; `./` prefixes dropped), as UTF-8 text.

    Raises InvalidArgument (status 1; its message names the path as `what`
    resolving to it) when it cannot be named so -- a result
    names the directory it read by an absolute path, in UTF-8 (include/tsffi.h):
    * relative while the working directory was removed (getcwd() fails;
      `.` itself is still a directory then, with no name), where the name
      given back as it was ("modelDir": "mtp", ".") broke that promise;
    * holding bytes that are not UTF-8 (from the working directory,
      $TURBOSPARK_HOME or $HOME: everything else a path is made of was
      checked UTF-8 already), which came back as lone surrogates that Swift's
      decoders refuse with the whole result (issue 40)."""
    if not path.startswith("/"):
        try:
            cwd = os.getcwd()
        except OSError as exc:
            raise InvalidArgument(
                f"{what} resolves to the relative path \"{_shown(path)}\", and the working "
                f"directory it is relative to was removed ({exc.strerror}): a result names the "
                "directory it read by its absolute path, and this one has none; accepts an "
                "absolute path (or a relative one while the working directory exists)") from None
        while path.startswith("./"):
            path = path[2:].lstrip("/")
        path = cwd if path in ("", ".") else os.path.join(cwd, path)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = path.encode("utf-8", "surrogateescape")
        at = len(path[:exc.start].encode("utf-8", "surrogateescape"))
        raise InvalidArgument(
            f"{what} resolves to {_shown(path)}, which is not UTF-8 (invalid byte "
            f"0x{raw[at]:02x} at offset {at}; shown escaped): results name the directory read "
            "in UTF-8, so the library cannot name this one; the bytes come from the working "
            "directory, $TURBOSPARK_HOME or $HOME: use ones whose paths are UTF-8") from None
    return path


def _shown(path: str) -> str:
    """`path` as UTF-8 text: a byte that is not UTF-8 as \\xNN."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def store_root() -> str | None:
    """`$TURBOSPARK_HOME`, else `$HOME/.turbospark`, as they are now; None
    when neither is set. Set but empty counts as set, as for the engine: an
    empty `$TURBOSPARK_HOME` is the current directory (`""`), an empty `$HOME`
    makes the root `.turbospark` there."""
    home = _getenv("TURBOSPARK_HOME")
    if home is not None:
        return home
    home = _getenv("HOME")
    if home is not None:
        return os.path.join(home, ".turbospark")
    return None


def resolve_model_name(name: str) -> str:
    """The directory the engine would open for `name` (a checked model_dir),
    as an absolute path; InvalidArgument when it has none (absolute_path)."""
    if _is_dir(name):
        return absolute_path(name)
    root = store_root()
    if root is not None:
        found = _recorded(root, name)
        if found is None:
            for pattern in DEFAULT_INSTALL_PATHS:
                # Joined as the engine joins it (a path join per component):
                # an absolute name replaces the root, `a/b` and `..` stay.
                folder, leaf = pattern.rsplit("/", 1)
                candidate = os.path.join(root, folder, leaf.format(name))
                if _is_dir(candidate):
                    found = candidate
                    break
        if found is not None:
            return absolute_path(found)
    return absolute_path(name)


def _recorded(root: str, name: str) -> str | None:
    """The path `<root>/installed.json` records for `name` (store.py: read
    bounded, decoded as the engine decodes it, remembered while unchanged)."""
    from .store import recorded_path
    return recorded_path(root, name)
