"""`turbospark-ffi make-install`: write a small install in the engine's layout
(or the four sample installs that ship with the package)."""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, CliError, Formatter, text_arg
from .report import WIDTH, number, plural, wrap

__all__ = ["register", "run", "probe_dtype", "MAX_LAYERS", "MAX_EXPERTS", "MAX_ROUTED_EXPERTS"]

DESCRIPTION = """
Write a small install into DIR in the engine's real layout: model_weights.bin
(the resident index, 16 KiB-aligned, and a sparse data region),
manifest.json and packed_experts/layout.json. The library and the engine's
own reader accept it. Without flags it is dense, carries neither drafter and
has 4 trunk layers, the first full-attention one at layer 3 with an INT4
affine probe.

With --samples, write the four sample installs that ship with the package
(none, mtp, dflash, both: 64 layers, the real dense 27B's entry counts) as
subdirectories of DIR; regenerate the shipped ones with
'turbospark-ffi make-install --samples turbospark_ffi/samples --force'.

With --store ROOT --alias NAME, the install is written to DIR (by default
ROOT/models/text/NAME.gturbo, the engine's own layout) and recorded under
NAME in ROOT/installed.json, so that `plan NAME` with TURBOSPARK_HOME=ROOT
reads it, as the engine's open would.

An existing model_weights.bin is never overwritten without --force.
"""

EPILOG = """
examples:
  turbospark-ffi make-install /tmp/ts/mtp --mtp
  turbospark-ffi make-install /tmp/ts/moe --mtp --experts 256
  turbospark-ffi make-install /tmp/ts/bf16 --mtp --probe-dtype bf16
  turbospark-ffi make-install --samples /tmp/ts/samples
  turbospark-ffi make-install --store /tmp/ts/store --alias qwen-mtp --mtp
"""

# Bounds that keep a test install small: the layout of the real MoE install
# is 40 layers x 256 experts (about 22 MB); twice that in all is plenty and
# stays under the engine's 64 MiB limit on a layout.
MAX_LAYERS = 1024
MAX_EXPERTS = 1024
MAX_ROUTED_EXPERTS = 2 * 40 * 256


def bounded_int(low: int, high: int):
    def parse(text: str) -> int:
        value = text.strip()
        if not (value.isascii() and value.isdigit()) or not low <= int(value) <= high:
            raise argparse.ArgumentTypeError(
                f"got {text!r}; accepts an integer in {low}..={high}")
        return int(value)
    return parse


def squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def probe_dtype(text: str) -> int:
    """--probe-dtype: a dtype tag (0..255: the reader does not validate the
    tag, so an unknown one is a shape worth testing) or a name from
    resident_index.DTYPE_NAMES, in any case and spacing ("INT4 affine",
    "int4", "q4_k", "GGUF Q4_K", "bf16")."""
    from ..resident_index import DTYPE_NAMES
    value = text.strip()
    if value.isascii() and value.isdigit():
        if int(value) <= 255:
            return int(value)
    else:
        wanted = squash(value)
        for tag, name in DTYPE_NAMES.items():
            spellings = {name, name.removeprefix("GGUF "), name.removesuffix(" affine")}
            if wanted and wanted in {squash(s) for s in spellings}:
                return tag
    names = ", ".join(f"{tag} {name}" for tag, name in DTYPE_NAMES.items() if tag != 14)
    raise argparse.ArgumentTypeError(f"got {text!r}; accepts a dtype tag in 0..=255 or one of "
                                     f"the names {names}")


def register(sub) -> None:
    make = sub.add_parser("make-install", help="write a small install in the engine's layout",
                          formatter_class=Formatter, description=DESCRIPTION, epilog=EPILOG)
    make.add_argument("dir", metavar="DIR", nargs="?",
                      help="the install directory (with --samples: where the four go; with "
                           "--store/--alias: default ROOT/models/text/NAME.gturbo)")
    make.add_argument("--mtp", action="store_true", help="add the full MTP head (15 tensors)")
    make.add_argument("--dflash", action="store_true",
                      help="add the full DFlash2 drafter (81 tensors)")
    make.add_argument("--experts", metavar="N", type=bounded_int(0, MAX_EXPERTS),
                      help="route N experts per layer: a MoE install (default 0: dense)")
    make.add_argument("--probe-dtype", metavar="D", type=probe_dtype,
                      help="the verify probe's dtype, a tag or a name: int4 (the default), "
                           "bf16, fp16, 1-bit, 2-bit, q4_k, ...")
    make.add_argument("--layers", metavar="N", type=bounded_int(0, MAX_LAYERS),
                      help="trunk layers (default 4); every 4th is full attention, so "
                           "fewer than 4 leaves no layer for the verify to probe")
    make.add_argument("--samples", action="store_true",
                      help="write the four sample installs (none, mtp, dflash, both) "
                           "under DIR")
    make.add_argument("--force", action="store_true",
                      help="overwrite an existing model_weights.bin")
    make.add_argument("--store", metavar="ROOT",
                      help="a model store's root (what $TURBOSPARK_HOME names): with --alias, "
                           "record the install in ROOT/installed.json")
    make.add_argument("--alias", metavar="NAME",
                      help="the alias to record the install under (with --store)")
    make.set_defaults(run=run)


def refuse_overwrite(path, force: bool) -> None:
    import os
    if not force and os.path.lexists(os.path.join(path, "model_weights.bin")):
        raise CliError(f"{os.path.join(path, 'model_weights.bin')} already exists; pass "
                       "--force to overwrite it (check it is not a real install first)")


def store_alias(args: argparse.Namespace) -> str | None:
    """--store/--alias checked (the alias, or None without them); DIR
    defaulted to the store's own place for the alias."""
    import os
    from ..install_writer import store_install_dir
    if (args.store is None) != (args.alias is None):
        given, missing = ("--store", "--alias") if args.alias is None else ("--alias", "--store")
        raise CliError(f"{given} needs {missing}: --store ROOT --alias NAME writes an install "
                       "into the store at ROOT and records it in ROOT/installed.json")
    if args.alias is None:
        if args.dir is None:
            raise CliError("make-install needs DIR (or --store ROOT --alias NAME); see "
                           "'turbospark-ffi make-install --help'")
        return None
    if args.samples:
        raise CliError("--samples writes four installs and takes no --store/--alias")
    alias = text_arg(args.alias, "--alias")
    if not alias or "/" in alias or alias in (".", ".."):
        raise CliError(f"--alias: got {alias!r}; accepts a non-empty name without '/' "
                       "(the engine looks it up as ROOT/models/text/NAME.gturbo)")
    if args.dir is None:
        args.dir = os.fspath(store_install_dir(args.store, alias))
    return alias


def write_the_samples(args: argparse.Namespace) -> int:
    import os
    from ..install_writer import SAMPLE_SHAPES, write_samples
    given = [flag for flag, on in (("--mtp", args.mtp), ("--dflash", args.dflash),
                                   ("--experts", args.experts is not None),
                                   ("--probe-dtype", args.probe_dtype is not None),
                                   ("--layers", args.layers is not None)) if on]
    if given:
        raise CliError(f"--samples writes the four fixed sample shapes and takes no "
                       f"{', '.join(given)}")
    for name in SAMPLE_SHAPES:
        refuse_overwrite(os.path.join(args.dir, name), args.force)
    try:
        written = write_samples(args.dir)
    except OSError as exc:
        raise CliError(f"cannot write the samples under {args.dir}: "
                       f"{exc.strerror or exc}") from None
    for path in written:
        summary(os.fspath(path))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    import os
    from ..install_writer import record_install, write_install
    alias = store_alias(args)
    if args.samples:
        return write_the_samples(args)
    experts = args.experts or 0
    layers = 4 if args.layers is None else args.layers
    if experts * layers > MAX_ROUTED_EXPERTS:
        raise CliError(f"--experts {experts} over --layers {layers} is "
                       f"{number(experts * layers)} routed experts; accepts at most "
                       f"{number(MAX_ROUTED_EXPERTS)} in all (twice the real MoE install's "
                       "40 x 256), which keeps the layout a test-sized file")
    refuse_overwrite(args.dir, args.force)
    try:
        path = write_install(args.dir, mtp=args.mtp, dflash=args.dflash, experts=experts,
                             layers=layers,
                             probe_dtype=4 if args.probe_dtype is None else args.probe_dtype)
    except OSError as exc:
        raise CliError(f"cannot write an install to {args.dir}: "
                       f"{exc.strerror or exc}") from None
    summary(os.fspath(path))
    if alias is not None:
        try:
            recorded = record_install(args.store, alias, path)
        except (OSError, ValueError) as exc:
            raise CliError(f"wrote {path}, but cannot record it in the store at {args.store}: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
        say(f"recorded {alias!r} in {recorded}", keep=(str(recorded),))
    return EXIT_OK


def say(line: str, keep: tuple[str, ...] = ()) -> None:
    """One report line, wrapped; the paths in `keep` are never split."""
    sys.stdout.write("\n".join(wrap(line, WIDTH, keep=keep, subsequent_indent="  ")) + "\n")
    sys.stdout.flush()


def summary(path: str) -> None:
    """One line per install written, read back through the library's reader."""
    from ..api import install_info
    info = install_info(path)
    if not info["indexReadable"]:  # pragma: no cover - the writer's own bug
        raise CliError(f"wrote {path}, but its index does not read back: "
                       f"{info['indexError']}")
    parts = [plural(info["entryCount"], "entry", "entries")]
    parts += [label for key, label in (("installHasMtpHead", "MTP head"),
                                       ("installHasDflash", "DFlash2 drafter")) if info[key]]
    experts = info["experts"]["expertsPerLayer"]
    parts.append(f"MoE, {experts} experts per layer" if experts else "dense")
    probe = info["probe"]
    if probe is not None and probe["present"]:
        parts.append(f"probe dtype {probe['dtype']} "
                     f"({probe['dtypeName'] or 'not a known dtype tag'})")
    elif probe is None:
        parts.append("no full-attention layer")
    say(f"wrote {path}: " + ", ".join(parts), keep=(path,))
