"""The rendering every report shares: rows of `label  value` wrapped to 80
columns, colour only on a terminal without NO_COLOR, numbers in words."""

from __future__ import annotations

__all__ = ["WIDTH", "Report", "colour_wanted", "number", "plural", "wrap", "yes_no"]

# Output fits an 80-column terminal; one column spare so that a line of full
# width never makes a terminal wrap on its own.
WIDTH = 79

# What stands in for a space inside a text `wrap` keeps whole: not whitespace
# to textwrap, and never in a path (POSIX paths cannot hold NUL).
_KEPT_SPACE = "\0"


def wrap(text: str, width: int, *, keep: tuple[str, ...] = (), **kwargs) -> list[str]:
    """`text` wrapped to `width` without ever breaking a word (a path or a
    tensor name copied from a terminal must be the real one), and with each
    string of `keep` (a path that may hold spaces) on one line whole. A word
    longer than the width gets a line of its own, longer than the width."""
    import textwrap
    kept = [k for k in keep if k and " " in k and _KEPT_SPACE not in text]
    for k in kept:
        text = text.replace(k, k.replace(" ", _KEPT_SPACE))
    lines = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False, **kwargs)
    return [line.replace(_KEPT_SPACE, " ") for line in lines] if kept else lines


def colour_wanted(stream) -> bool:
    import os
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class Report:
    """Rows of `label  value`, the value wrapped under itself. A row may
    start with a status word, coloured by tone when colour is on."""

    TONES = {"good": "32", "warn": "33", "bad": "31", "dim": "2"}

    def __init__(self, stream, label_width: int) -> None:
        self.stream = stream
        self.colour = colour_wanted(stream)
        self.label_width = label_width
        self.lines: list[str] = []

    def paint(self, text: str, tone: str | None) -> str:
        if not self.colour or not tone or not text:
            return text
        return f"\033[{self.TONES[tone]}m{text}\033[0m"

    def bold(self, text: str) -> str:
        return f"\033[1m{text}\033[0m" if self.colour and text else text

    def row(self, label: str, text: str = "", *, status: str = "", tone: str | None = None,
            indent: int = 0, keep: tuple[str, ...] = ()) -> None:
        """One row; `keep`: strings of `text` never split across lines (paths)."""
        lead = " " * indent + label
        pad = max(self.label_width, len(lead) + 2)
        body = status + (" " + text if status and text else text)
        width = WIDTH - pad
        lines = wrap(body, width, keep=keep) or [""]
        if status and lines[0].startswith(status):
            lines[0] = self.paint(status, tone) + lines[0][len(status):]
        head = self.bold(lead) + " " * (pad - len(lead))
        self.lines.append((head + lines[0]).rstrip())
        self.lines.extend(" " * pad + line for line in lines[1:])

    def more(self, text: str, *, tone: str | None = None, extra_indent: int = 0) -> None:
        """A continuation line (or lines) under the value column."""
        pad = self.label_width + extra_indent
        for line in wrap(text, WIDTH - pad) or [""]:
            self.lines.append(" " * pad + self.paint(line, tone))

    def flush(self) -> None:
        self.stream.write("\n".join(self.lines) + "\n")
        self.stream.flush()


def number(n: int) -> str:
    return f"{n:,}"


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{number(n)} {one if n == 1 else (many or one + 's')}"


def yes_no(flag: bool | None) -> str:
    return "unknown" if flag is None else ("yes" if flag else "no")
