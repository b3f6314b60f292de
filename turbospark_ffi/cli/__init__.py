"""The `turbospark-ffi` command (also `python -m turbospark_ffi`).

    config         how a native host compiles and links the library
    inspect DIR    what an install's files say (the resident index, the two
                   drafters, the verify probe, the routed experts)
    plan DIR       what the library decides for an install under the options
                   a host would pass, in plain words or as the C ABI's JSON
    choices DIR    what every speculation / drafter item of a settings pane
                   would do, as a grid or as the C ABI's JSON
    reconcile DIR  the preview against what the engine's open reported
                   (ts_session_info_json's text, or its failed status)
    make-install   write a small install in the engine's layout (or the four
                   sample installs that ship with the package)
    bundle OUT     a relocatable folder holding the library and its Python

Exit status: 0 done (for `plan`: planned, whether speculation is on or off),
2 refused, as the engine's open refuses with its status 2 (an option value
the open refuses, an install it fails on, or a named block that cannot be
served: the engine's or the original module's message, verbatim, on
stderr), 1 anything else that went wrong (an invalid argument, an install
that cannot be written) -- always one line on stderr, never a traceback.

HOW `--json` STAYS BYTE-IDENTICAL TO THE C ABI: inspect, plan and choices
make the one request the C ABI makes for the same arguments (`plan.request`:
DIR checked, the options parsed, DIR resolved, the install read) and print
the very answer it returns (wire's `*_json`), rather than loading libtsffi
with ctypes. Loading the library would start a second copy of the policy
behind a C boundary for no new answer, fail wherever the library is not
built (a source checkout, a platform without a wheel), and cost its embedded
start-up on every command; tests/test_request.py and tests/test_cli.py hold
the two together by comparing against the C ABI itself.

The modules: `parser` (the grammar; each family registers its own
subcommands), `config`, `inspect`, `decisions` (plan and choices),
`make_install`, `bundle` (a delegate to turbospark_ffi.bundle), `report`
(the rendering they share), `common` (exit statuses, errors, arguments).
Heavy imports are inside the functions: this package is imported on every
command, and the package's import time matters.
"""

from __future__ import annotations

import sys

from .common import EXIT_ERROR, EXIT_OK, EXIT_REFUSED, CliError

__all__ = ["main", "EXIT_OK", "EXIT_ERROR", "EXIT_REFUSED"]

# Option key -> the flag that sets it, so that the grammar's refusal names
# both what the person typed and what a host would send.
FLAG_FOR_KEY = {"speculation": "--speculation", "speculativeDrafter": "--speculative-drafter",
                "tsffi.temperature": "--temperature", "tsffi.engineBlocker": "--engine-blocker",
                "tsffi.lowPowerMode": "--low-power-mode"}


def quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null, so that the
    interpreter's own flush at exit does not print a second error."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def error_line(command: str | None, exc: BaseException | str) -> str:
    """One line for an error: a refusal of the option grammar also names the
    flag that set the option it refuses (InvalidArgument.option)."""
    prog = "turbospark-ffi" + (f" {command}" if command else "")
    message = " ".join(str(exc).split()) or type(exc).__name__
    option = getattr(exc, "option", None)
    flag = FLAG_FOR_KEY.get(option) if option is not None else None
    if flag is not None:
        message = f"{flag} (option key {option}): {message[len(option) + 2:]}"
    return f"{prog}: {message}\n"


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        try:  # text a terminal cannot encode is escaped, never a crash
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
    from .parser import build_parser
    args = build_parser().parse_args(argv)
    command = getattr(args, "command", None)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        quiet_stdout()
        return EXIT_OK
    except Exception as exc:  # the boundary: one line, never a traceback
        from ..errors import TurbosparkError
        if isinstance(exc, (TurbosparkError, CliError)):
            line = error_line(command, exc)
        else:
            line = error_line(command, f"internal error: {type(exc).__name__}: {exc}")
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except OSError:
            pass
        return EXIT_ERROR
