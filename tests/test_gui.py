"""The GTK 4 settings window (examples/gtk) driven headless under Xvfb.

The app runs in its drive mode: commands on stdin set the real widgets (the
model entry's text, the drop-downs' selected items), so the real signal
handlers, worker tasks and generation counter run; every time the preview
changes, and on request once it has settled and been painted, it prints a
JSON line of what its labels and drop-down items actually show. Each of those
is compared with the library's own answer for the same options, read here
through ctypes from the same library the app loads.

Nothing here is skipped: a machine without GTK 4, json-glib, Xvfb or
ImageMagick fails with the command that installs them (.ci/run runs it).
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import LIBRARY, ROOT, compile_c_host

APP_SOURCE = ROOT / "examples" / "gtk" / "tsffi_settings.c"
SAMPLES = ROOT / "turbospark_ffi" / "samples"
SAMPLE_NAMES = ("none", "mtp", "dflash", "both")
# Where the screenshot lands, for the README (docs/gtk-dflash.png is a copy).
SCREENSHOT = ROOT / "build" / "gui" / "gtk-dflash.png"

PKG_MODULES = ("gtk4", "json-glib-1.0", "gio-unix-2.0")
# Real ImageMagick: /usr/local/bin on these machines may hold a stand-in.
IMPORT = "/usr/bin/import"
IDENTIFY = "/usr/bin/identify"
APT = ("apt-get install -y --no-install-recommends libgtk-4-dev libjson-glib-dev pkg-config "
       "xvfb xauth imagemagick (as .ci/run does)")

# The drop-downs' items, in the app's order, with the option value each sends.
SPECULATION = (("Auto", "auto"), ("Off", "off"), ("Block 2", 2), ("Block 4", 4),
               ("Block 8", 8))
DRAFTER = ("auto", "mtp", "dflash")

DFLASH_NOTE_START = "this install carries a DFlash2 drafter, which auto leaves OFF"

# Bounded waits for a window on a shared machine: how long to wait before
# calling a window stuck, not a claim about speed.
SETTLE_WAIT = 60.0
MONITOR_WAIT = 2.0   # the file-monitor case's "within 2 s"


# ---------------------------------------------------------------------------
# What the machine must have.

def _missing_tools() -> list[str]:
    missing = []
    if shutil.which("pkg-config") is None:
        missing.append("pkg-config")
    else:
        for module in PKG_MODULES:
            if subprocess.run(["pkg-config", "--exists", module]).returncode != 0:
                missing.append(f"pkg-config module {module}")
    if shutil.which("Xvfb") is None:
        missing.append("Xvfb")
    for tool in (IMPORT, IDENTIFY):
        if not os.access(tool, os.X_OK):
            missing.append(f"{tool} (ImageMagick)")
    return missing


@pytest.fixture(scope="session")
def gui_tools() -> None:
    missing = _missing_tools()
    if missing:
        pytest.fail("the GUI tests need " + ", ".join(missing) + f"; install them with: {APT}",
                    pytrace=False)


@pytest.fixture(scope="session")
def app(gui_tools, tmp_path_factory) -> Path:
    """The settings window, compiled from examples/gtk as the README builds it."""
    out = tmp_path_factory.mktemp("gui") / "tsffi-settings"
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", *PKG_MODULES],
                           capture_output=True, text=True, check=True).stdout.split()
    cmd = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic",
           f"-I{ROOT / 'include'}", "-o", str(out), str(APP_SOURCE), *flags, "-ldl"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stderr}"
    assert result.stderr == ""
    return out


@pytest.fixture(scope="session")
def display(gui_tools):
    """A private Xvfb display. -displayfd picks a free number, so parallel runs
    on one machine do not collide."""
    read_fd, write_fd = os.pipe()
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1024x768x24",
                             "-nolisten", "tcp", "-br"],
                            pass_fds=(write_fd,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        number = f.readline().strip()
    if not number:
        xvfb.kill()
        pytest.fail(f"Xvfb did not start: {xvfb.communicate()[1].decode(errors='replace')}",
                    pytrace=False)
    yield f":{number}"
    xvfb.terminate()
    xvfb.wait(timeout=30)


def gui_env(display: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("WAYLAND_DISPLAY", "TSFFI_LIBRARY")}
    env.update(DISPLAY=display, GDK_BACKEND="x11",
               # No session bus under Xvfb: without this GTK's accessibility
               # bridge says so on stderr.
               GTK_A11Y="none",
               # No GPU: the cairo renderer starts faster than GL.
               GSK_RENDERER="cairo",
               # Any GTK or GLib warning aborts the app, so an empty stderr
               # means there were none.
               G_DEBUG="fatal-warnings")
    env.update(extra)
    return env


class Window:
    """One running app in drive mode."""

    def __init__(self, app: Path, display: str, *args: str, env: dict | None = None,
                 cwd: Path | None = None, stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "w")
        self.proc = subprocess.Popen([str(app), "--drive", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=env or gui_env(display), cwd=cwd, text=True)
        self.events: queue.Queue = queue.Queue()
        self.log: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line))
            except ValueError:
                self.events.put({"event": "not-json", "line": line})
        self.events.put(None)

    def send(self, *commands: str) -> None:
        for command in commands:
            self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def next_event(self, timeout: float) -> dict | None:
        """The next line, or None when none came within `timeout` (or the app ended)."""
        try:
            event = self.events.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None
        if event is not None:
            self.log.append(event)
        return event

    def request(self, command: str, answer: str) -> dict:
        """Send `command` and return the next `answer` event."""
        self.send(command)
        deadline = time.monotonic() + SETTLE_WAIT
        while True:
            event = self.next_event(deadline - time.monotonic())
            assert event is not None, f"no {answer!r} within {SETTLE_WAIT} s; {self.describe()}"
            assert event["event"] != "not-json", event
            if event["event"] == answer:
                return event

    def settle(self) -> dict:
        return self.request("settle", "settled")

    def wait_for(self, name: str) -> dict:
        """The first `name` event so far, else the next one."""
        for event in self.log:
            if event["event"] == name:
                return event
        deadline = time.monotonic() + SETTLE_WAIT
        while True:
            event = self.next_event(deadline - time.monotonic())
            assert event is not None, f"no {name!r} within {SETTLE_WAIT} s; {self.describe()}"
            if event["event"] == name:
                return event

    def rows(self, drop_down: str, click: str = "") -> list[dict]:
        """Open a drop-down's list: its rows as drawn (then click one)."""
        return self.request(f"rows {drop_down} {click}".rstrip(), "rows")["rows"]

    def close(self) -> tuple[int, str]:
        """Quit; the exit status and everything the app wrote on stderr."""
        try:
            self.send("quit")
        except BrokenPipeError:
            pass
        status = self.proc.wait(timeout=SETTLE_WAIT)
        while self.next_event(0) is not None:
            pass
        self._stderr.close()
        return status, self.stderr_path.read_text()

    def describe(self) -> str:
        status = self.proc.poll()
        return f"exit status {status}; stderr: {self.stderr_path.read_text()!r}"


@pytest.fixture
def open_window(app, display, tmp_path):
    """Opens windows; unless told otherwise, on an empty model store (so what
    this machine has installed stays out of the tests)."""
    windows = []

    def open_(*args: str, **kw) -> Window:
        kw.setdefault("env", gui_env(display, TURBOSPARK_HOME=str(tmp_path / "no-store")))
        window = Window(app, display, *args, stderr_path=tmp_path / f"stderr{len(windows)}",
                        **kw)
        windows.append(window)
        return window
    yield open_
    for window in windows:
        if window.proc.poll() is None:
            window.proc.kill()
            window.proc.wait()


# ---------------------------------------------------------------------------
# The library's own answers, and what the window is expected to make of them.

def library_answer(lib, model: str, speculation, drafter: str,
                   base: dict | None = None) -> tuple[int, object]:
    """(status, plan dict) on success, (status, last error text) otherwise;
    `base` is the host's own options object the window was given."""
    options = json.dumps({**(base or {}), "speculation": speculation,
                          "speculativeDrafter": drafter})
    out = ctypes.c_void_p()
    status = lib.tsffi_speculation_plan(model.encode(), options.encode(), ctypes.byref(out))
    if status == 0:
        text = ctypes.string_at(out.value).decode()
        lib.tsffi_string_free(out)
        return status, json.loads(text)
    size = lib.tsffi_last_error(None, 0)
    buf = ctypes.create_string_buffer(size + 1)
    lib.tsffi_last_error(buf, size + 1)
    return status, buf.value.decode()


def library_choices(lib, model: str, speculation, drafter: str) -> dict:
    """tsffi_speculation_choices for one selection: the call the window makes."""
    options = json.dumps({"speculation": speculation, "speculativeDrafter": drafter})
    out = ctypes.c_void_p()
    status = lib.tsffi_speculation_choices(model.encode(), options.encode(), ctypes.byref(out))
    assert status == 0, f"tsffi_speculation_choices({model!r}, {options}) = {status}"
    text = ctypes.string_at(out.value).decode()
    lib.tsffi_string_free(out)
    return json.loads(text)


def expected_labels(status: int, answer, codes) -> dict[str, str]:
    """The preview for one answer: the app's wording around the library's own
    text, which must appear verbatim."""
    if status == codes["TSFFI_ERR_REFUSED"]:
        return {"drafter": "none: the engine would refuse to open", "speculation": "refused",
                "turn": "-", "policies": "-", "messageKind": "Refused", "message": answer}
    if status != codes["TSFFI_OK"]:
        return {"drafter": "-", "speculation": "-", "turn": "-", "policies": "-",
                "messageKind": f"Error {status}", "message": answer}
    note = answer["drafter"]["note"]
    reason = answer["speculation"]["reason"]
    block = answer["speculation"]["block"]

    def policy(name: str) -> str:
        p = answer["draftPolicies"][name]
        return f"{name} {p['mode']}" + (f" {p['block']}" if p.get("block") else "")

    if note and reason and note != reason:
        message = f"{note}\n\n{reason}"
    else:
        message = note or reason or ""
    # The engine app's words for a session that drafts, then whether this
    # host's turns speculate, with the library's reason verbatim.
    turn = answer["turn"]
    if block is None:
        turn_label = "none: the session does not draft"
    else:
        session = f"{answer['speculation']['drafter']} x{block}, greedy only: this host's turns "
        turn_label = session + ("speculate" if turn["speculates"]
                                else f"do not speculate\n{turn['reason']}")
    return {"drafter": answer["drafter"]["drafter"],
            "speculation": f"yes, block {block}" if block is not None else "no",
            "turn": turn_label,
            "policies": f"{policy('mtp')}, {policy('dflash')}",
            "messageKind": "Note" if note else "Reason" if reason else "",
            "message": message}


NO_MODEL = {"drafter": "-", "speculation": "-", "turn": "-", "policies": "-",
            "messageKind": "", "message": "Choose a model folder or an installed model."}


def shown(event: dict) -> dict[str, str]:
    return {k: event[k] for k in ("drafter", "speculation", "turn", "policies", "messageKind",
                                  "message")}


def marks(event: dict, key: str) -> list[dict]:
    return [{"available": i["available"], "refusal": i["refusal"]} for i in event[key]]


class Oracle:
    """The library's answers for an install that does not change: a
    tsffi_speculation_plan call per item, each also cross-checked against the
    tsffi_speculation_choices entry the window reads it from. `folders` maps a
    model name to the folder whose answers it must show (an alias to the
    folder it was installed in)."""

    def __init__(self, lib, codes, folders: dict[str, str] | None = None) -> None:
        self.lib, self.codes, self.folders = lib, codes, folders or {}
        self.cache, self.checked = {}, {}

    def answer(self, model: str, s: int, d: int):
        key = (self.folders.get(model, model), s, d)
        if key not in self.cache:
            self.cache[key] = library_answer(self.lib, key[0], SPECULATION[s][1], DRAFTER[d])
        return self.cache[key]

    def choices_disagree(self, model: str, s: int, d: int) -> list[str]:
        """Where the choices for selection (s, d) differ from the per-item
        plans, for every item the window shows with that selection."""
        folder = self.folders.get(model, model)
        if (folder, s, d) in self.checked:
            return self.checked[folder, s, d]
        choices = library_choices(self.lib, folder, SPECULATION[s][1], DRAFTER[d])
        entries = {(e["speculation"], e["speculativeDrafter"]): e for e in choices["choices"]}
        out = []
        for i, j in [(i, d) for i in range(len(SPECULATION))] + \
                    [(s, j) for j in range(len(DRAFTER))]:
            entry = entries[SPECULATION[i][1], DRAFTER[j]]
            status, answer = self.answer(model, i, j)
            got = (entry["status"], entry["plan"] if entry["status"] == 0 else entry["error"])
            if status == 0:
                # An item's plan leaves out what the table says once (ABI 3).
                answer = {k: v for k, v in answer.items()
                          if k not in ("ignoredKeys", "warnings", "modelDir")}
            if got != (status, answer):
                out.append(f"choices entry {SPECULATION[i][0]} {DRAFTER[j]}: {got}, "
                           f"plan call: {(status, answer)}")
            if status != 0 and entry["plan"] is not None:
                out.append(f"choices entry {SPECULATION[i][0]} {DRAFTER[j]} has a plan")
        selected = [key for key, e in entries.items() if e["selected"]]
        if selected != [(SPECULATION[s][1], DRAFTER[d])]:
            out.append(f"choices selected {selected}, asked {SPECULATION[s][1], DRAFTER[d]}")
        self.checked[folder, s, d] = out
        return out

    def mark(self, model: str, s: int, d: int) -> dict:
        status, answer = self.answer(model, s, d)
        refused = status == self.codes["TSFFI_ERR_REFUSED"]
        return {"available": not refused, "refusal": answer if refused else None}

    def mismatches(self, event: dict) -> list[str]:
        """Everything in `event` that differs from the library, for the
        selection the event itself reports."""
        model = event["model"]
        if model == "":
            # Setting an entry's text empties it first: the window asks
            # nothing for an empty model and says so.
            return [] if shown(event) == NO_MODEL else [f"no model: shown {shown(event)}"]
        s = [label for label, _ in SPECULATION].index(event["selectedSpeculation"])
        d = DRAFTER.index(event["selectedDrafter"])
        want = expected_labels(*self.answer(model, s, d), self.codes)
        got = shown(event)
        out = [f"{key}: shown {got[key]!r}, library {want[key]!r}"
               for key in want if got[key] != want[key]]
        want_spec = [self.mark(model, i, d) for i in range(len(SPECULATION))]
        want_drafter = [self.mark(model, s, j) for j in range(len(DRAFTER))]
        if marks(event, "speculationItems") != want_spec:
            out.append(f"speculation items: shown {marks(event, 'speculationItems')}, "
                       f"library {want_spec}")
        if marks(event, "drafterItems") != want_drafter:
            out.append(f"drafter items: shown {marks(event, 'drafterItems')}, "
                       f"library {want_drafter}")
        return out + self.choices_disagree(model, s, d)


def table_row(event: dict) -> str:
    name = Path(event["model"]).name
    items = " ".join(f"{i['label']}{'' if i['available'] else '(x)'}"
                     for i in event["speculationItems"] + event["drafterItems"])
    return (f"{name:7} {event['selectedSpeculation']:8} {event['selectedDrafter']:7} | "
            f"{event['drafter']} | {event['speculation']} | {event['policies']} | "
            f"{event['messageKind']}: {event['message']} | items: {items}")


# ---------------------------------------------------------------------------
# The tests.

def test_every_sample_and_every_combination(open_window, loaded, codes, tmp_path):
    """4 sample installs x 5 x 3 selections: every label and every item mark the
    window shows is the library's answer for the same options. Every preview
    the window showed on the way (not only the settled ones) is checked against
    the selection it was shown with, so a stale answer shown after a newer
    choice is a mismatch too."""
    oracle = Oracle(loaded.lib, codes)
    window = open_window("--library", str(LIBRARY))
    rows, problems = [], []
    for name in SAMPLE_NAMES:
        model = str(SAMPLES / name)
        window.send(f"model {model}")
        for s in range(len(SPECULATION)):
            for d in range(len(DRAFTER)):
                window.send(f"speculation {s}", f"drafter {d}")
                event = window.settle()
                assert (event["model"], event["selectedSpeculation"], event["selectedDrafter"]) \
                    == (model, SPECULATION[s][0], DRAFTER[d])
                rows.append(table_row(event))
                problems += [f"{name} {SPECULATION[s][0]} {DRAFTER[d]}: {p}"
                             for p in oracle.mismatches(event)]
                if (name, s, d) == ("dflash", 0, 0):
                    assert event["messageKind"] == "Note"
                    assert event["message"].startswith(DFLASH_NOTE_START), event["message"]
    status, stderr = window.close()
    previews = [e for e in window.log if e["event"] == "shown"]
    for event in previews:
        problems += [f"shown preview {table_row(event)}: {p}" for p in oracle.mismatches(event)]
    out = ROOT / "build" / "gui" / "combinations.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(rows) + "\n")
    assert len(rows) == len(SAMPLE_NAMES) * len(SPECULATION) * len(DRAFTER)
    assert problems == [], "\n".join(problems[:20]) + "\n\nwhat the window showed:\n" + \
        "\n".join(rows)
    assert (status, stderr) == (0, "")


def test_open_lists_mark_refused_items_and_refuse_clicks(open_window, loaded, codes):
    """The lists a person opens: each row the library would refuse is drawn
    insensitive with the refusal as its tooltip, and clicking it chooses
    nothing; clicking any other row chooses it."""
    oracle = Oracle(loaded.lib, codes)
    window = open_window("--library", str(LIBRARY))
    problems = []
    for name in SAMPLE_NAMES:
        model = str(SAMPLES / name)
        window.send(f"model {model}")
        for s, d in ((0, 0), (2, 0), (0, 2), (2, 2), (1, 1)):
            window.send(f"speculation {s}", f"drafter {d}")
            window.settle()
            for drop_down, labels, mark in (
                    ("speculation", [label for label, _ in SPECULATION],
                     lambda i: oracle.mark(model, i, d)),
                    ("drafter", list(DRAFTER), lambda j: oracle.mark(model, s, j))):
                rows = window.rows(drop_down)
                want = [{"label": label, "sensitive": mark(i)["available"],
                         "tooltip": mark(i)["refusal"]} for i, label in enumerate(labels)]
                if rows != want:
                    problems.append(f"{name} {SPECULATION[s][0]} {DRAFTER[d]} {drop_down} list: "
                                    f"drawn {rows}, library {want}")

    # Clicks, on the install where auto refuses every block.
    model = str(SAMPLES / "dflash")
    window.send(f"model {model}", "speculation 0", "drafter 0")
    window.settle()
    clicked = []
    for i, (label, _) in enumerate(SPECULATION):
        refused = not oracle.mark(model, i, 0)["available"]
        window.rows("speculation", label)
        chosen = window.settle()["selectedSpeculation"]
        clicked.append((label, refused, chosen))
        assert chosen == ("Auto" if refused else label), clicked
        window.send("speculation 0")
    assert {refused for _, refused, _ in clicked} == {True, False}, clicked
    assert window.close() == (0, "")
    assert problems == [], "\n".join(problems)


# The host's own object: a near-miss key and a key that moved into "tsffi"
# (each a warning, ignored as the open ignores them), an engine key the open
# checks, and the preview's own input.
HOST_OPTIONS = {"Speculation": 4, "temperature": 0.7, "kvBits": "4",
                "tsffi": {"engineBlocker": "the vision tower is active"}}


def test_the_hosts_own_options_and_their_warnings(open_window, loaded, codes):
    """--options: the window sends the host's object with its two pickers'
    keys set. The preview is the library's answer for that object, and the
    library's warnings about it are shown, verbatim; without warnings the
    row is empty."""
    model = str(SAMPLES / "mtp")
    window = open_window("--library", str(LIBRARY), "--model", model,
                         "--options", json.dumps(HOST_OPTIONS))
    event = window.settle()
    status, answer = library_answer(loaded.lib, model, "auto", "auto", HOST_OPTIONS)
    assert status == 0 and len(answer["warnings"]) == 2
    assert shown(event) == expected_labels(status, answer, codes)
    assert event["message"] == "the vision tower is active"  # tsffi.engineBlocker was sent
    assert event["warnings"] == "\n".join(answer["warnings"])
    assert window.close() == (0, "")
    plain = open_window("--library", str(LIBRARY), "--model", model)
    assert plain.settle()["warnings"] == ""
    assert plain.close() == (0, "")


# The turn row (ABI 4), written out: the engine app's "{drafter} x{block},
# greedy only", then whether the host's own turns speculate and why not.
TURN_TEMPERATURE_02 = (
    "mtp x2, greedy only: this host's turns do not speculate\nthis session drafts, but a turn "
    "speculates only at temperature 0 and this turn's temperature is 0.2 (the engine binding's "
    "default): it decodes sequentially (send temperature 0 to speculate)")
TURN_ROWS = [
    ("mtp", {}, TURN_TEMPERATURE_02),
    ("mtp", {"tsffi": {"temperature": 0}}, "mtp x2, greedy only: this host's turns speculate"),
    ("mtp", {"tsffi": {"temperature": 0, "lowPowerMode": True}},
     "mtp x2, greedy only: this host's turns do not speculate\nthis session drafts, but Low "
     "Power Mode resolves the absent powerProfile to \"efficiency\", which turns the engine's "
     "rate control on, and a turn under rate control decodes sequentially (set powerProfile "
     "\"performance\" to speculate)"),
    ("none", {"tsffi": {"temperature": 0}}, "none: the session does not draft"),
]


@pytest.mark.parametrize("sample,options,turn", TURN_ROWS)
def test_the_turn_row_says_whether_the_hosts_turns_speculate(open_window, sample, options, turn):
    window = open_window("--library", str(LIBRARY), "--model", str(SAMPLES / sample),
                         "--options", json.dumps(options))
    event = window.settle()
    assert event["turn"] == turn
    assert window.close() == (0, "")


@pytest.mark.parametrize("text,message", [
    ("[1]", "--options: got [1]; accepts a JSON object\n"),
    ("{nope", None),
])
def test_options_that_are_not_an_object_are_refused_at_start(app, display, text, message):
    result = subprocess.run([str(app), "--options", text], env=gui_env(display),
                            capture_output=True, text=True, timeout=SETTLE_WAIT)
    assert result.returncode == 2 and result.stdout == ""
    if message is not None:
        assert result.stderr == message
    else:
        assert result.stderr.startswith("--options: ") and \
            result.stderr.endswith("; accepts a JSON object\n")


def test_superseded_changes_never_show(open_window, loaded, codes):
    """Changes sent back to back, faster than the answers: whatever previews
    appear in between, each matches the selection it was shown with, and the
    last one is the last selection's."""
    oracle = Oracle(loaded.lib, codes)
    window = open_window("--library", str(LIBRARY), "--model", str(SAMPLES / "both"))
    window.settle()
    burst = []
    for name in ("dflash", "mtp", "none", "dflash"):
        burst.append(f"model {SAMPLES / name}")
        for s, d in ((2, 0), (4, 2), (1, 1), (0, 0), (3, 2)):
            burst += [f"speculation {s}", f"drafter {d}"]
    window.send(*burst)
    final = window.settle()
    assert (final["model"], final["selectedSpeculation"], final["selectedDrafter"]) == \
        (str(SAMPLES / "dflash"), "Block 4", "dflash")
    status, stderr = window.close()
    for event in [e for e in window.log if e["event"] in ("shown", "settled")]:
        assert oracle.mismatches(event) == [], table_row(event)
    assert (status, stderr) == (0, "")


def test_drafter_written_into_the_open_install_updates_the_preview(open_window, loaded, codes,
                                                                   tmp_path):
    """The window watches the model folder: a DFlash2 drafter streamed into the
    install it shows changes the displayed note by itself, within 2 s."""
    from turbospark_ffi.install_writer import write_install
    model = write_install(tmp_path / "model", layers=64)   # no drafter yet
    window = open_window("--library", str(LIBRARY), "--model", str(model))
    before = window.settle()
    status, answer = library_answer(loaded.lib, str(model), "auto", "auto")
    assert shown(before) == expected_labels(status, answer, codes)

    write_install(model, layers=64, dflash=True)
    written = time.monotonic()
    status, answer = library_answer(loaded.lib, str(model), "auto", "auto")
    want = expected_labels(status, answer, codes)
    assert want["message"].startswith(DFLASH_NOTE_START)
    assert want != shown(before)
    seen = None
    while time.monotonic() - written < MONITOR_WAIT:
        event = window.next_event(written + MONITOR_WAIT - time.monotonic())
        if event is not None and event["event"] == "shown" and shown(event) == want:
            seen = time.monotonic() - written
            break
    assert seen is not None, (f"the preview did not show the new note within {MONITOR_WAIT} s; "
                              f"it showed: {[shown(e) for e in window.log[1:]]}")
    print(f"note shown {seen:.2f} s after the install was rewritten")
    assert (window.settle()["messageKind"], window.close()) == ("Note", (0, ""))


def test_an_installed_alias_shows_its_folders_answers(open_window, display, loaded, codes,
                                                      tmp_path, monkeypatch):
    """A model store ($TURBOSPARK_HOME) with aliases recorded by the installer:
    the "Installed" list offers the text ones; an alias chosen there (or typed)
    shows every label and mark of the folder it names; the folder watched is
    that one, so a drafter streamed into it updates the note within 2 s; and
    re-pointing an alias in the store moves the preview by itself."""
    from turbospark_ffi.install_writer import record_install, write_install
    store = tmp_path / "store"
    result = subprocess.run([sys.executable, "-m", "turbospark_ffi", "make-install",
                             "--store", str(store), "--alias", "qwen-gui", "--layers", "64"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    folder = str(store / "models" / "text" / "qwen-gui.gturbo")
    record_install(store, "mtp-sample", SAMPLES / "mtp")
    record_install(store, "pictures", SAMPLES / "both", kind="image")   # not a text model
    # The library resolves the names to those folders in this process too.
    monkeypatch.setenv("TURBOSPARK_HOME", str(store))
    assert library_choices(loaded.lib, "qwen-gui", "auto", "auto")["modelDir"] == folder
    oracle = Oracle(loaded.lib, codes, {"qwen-gui": folder,
                                        "mtp-sample": str(SAMPLES / "mtp")})

    window = open_window("--library", str(LIBRARY),
                         env=gui_env(display, TURBOSPARK_HOME=str(store)))
    assert window.wait_for("store")["installed"] == ["qwen-gui", "mtp-sample"]
    assert window.rows("installed", "qwen-gui") == [
        # The library's listing (tsffi_store_json): the directory and the
        # install's drafters as badges; the image row is not offered.
        {"label": "qwen-gui", "sensitive": True, "tooltip": f"{folder}\ncarries neither drafter"},
        {"label": "mtp-sample", "sensitive": True,
         "tooltip": f"{SAMPLES / 'mtp'}\ncarries the MTP head"}]
    event = window.settle()
    assert (event["model"], event["watching"]) == ("qwen-gui", folder)
    problems = []
    for s in range(len(SPECULATION)):
        for d in range(len(DRAFTER)):
            window.send(f"speculation {s}", f"drafter {d}")
            problems += oracle.mismatches(window.settle())
    window.send("model mtp-sample", "speculation 3", "drafter 1")   # typed, not chosen
    event = window.settle()
    assert (event["model"], event["watching"]) == ("mtp-sample", str(SAMPLES / "mtp"))
    problems += oracle.mismatches(event)
    assert problems == [], "\n".join(problems)

    # The store re-points the alias in the entry: no click, and the preview
    # and the folder watched follow it (a bounded wait for a stuck window, not
    # a speed claim). Nothing has been written into a watched folder yet, so
    # only the store's own change can move the preview.
    record_install(store, "mtp-sample", SAMPLES / "none")
    want = expected_labels(*library_answer(loaded.lib, str(SAMPLES / "none"), 4, "mtp"), codes)
    assert want != shown(event)
    deadline = time.monotonic() + SETTLE_WAIT
    while True:
        event = window.next_event(deadline - time.monotonic())
        assert event is not None, f"the preview did not follow the re-pointed alias; " \
            f"it showed: {[shown(e) for e in window.log if 'drafter' in e][-3:]}"
        if event["event"] == "shown" and shown(event) == want:
            break
    event = window.settle()
    assert (event["model"], event["watching"]) == ("mtp-sample", str(SAMPLES / "none"))
    oracle.folders["mtp-sample"] = str(SAMPLES / "none")
    assert oracle.mismatches(event) == []

    # The alias's folder is the one watched: a DFlash2 drafter streamed into it.
    window.send("model qwen-gui", "speculation 0", "drafter 0")
    before = window.settle()
    write_install(folder, layers=64, dflash=True)
    written = time.monotonic()
    want = expected_labels(*library_answer(loaded.lib, folder, "auto", "auto"), codes)
    assert want["message"].startswith(DFLASH_NOTE_START) and want != shown(before)
    seen = None
    while seen is None and time.monotonic() - written < MONITOR_WAIT:
        event = window.next_event(written + MONITOR_WAIT - time.monotonic())
        if event is not None and event["event"] == "shown" and shown(event) == want:
            seen = time.monotonic() - written
    assert seen is not None, (f"the preview did not show the new note within {MONITOR_WAIT} s; "
                              f"it showed: {[shown(e) for e in window.log if 'drafter' in e][-3:]}")
    print(f"note shown {seen:.2f} s after the alias's install was rewritten")
    assert window.close() == (0, "")


LAST_ERROR_HOST = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
/* Prints the library's answer to its first runtime call: the status, then the
 * last error, as the window's loader makes that call. */
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    int (*info)(char **);
    size_t (*last_error)(char *, size_t);
    char *out = NULL, *msg;
    size_t n;
    (void)argc;
    if (h == NULL) { printf("dlopen\n%s", dlerror()); return 0; }
    *(void **)&info = dlsym(h, "tsffi_build_info_json");
    *(void **)&last_error = dlsym(h, "tsffi_last_error");
    printf("%d\n", info(&out));
    n = last_error(NULL, 0);
    msg = malloc(n + 1);
    last_error(msg, n + 1);
    printf("%s", msg);
    return 0;
}
"""


def test_missing_runtime_shows_the_library_message(open_window, tmp_path, codes):
    """The library copied without its Python package: it loads, its runtime
    cannot start, and the window shows the library's own message (exit 0)."""
    lonely = tmp_path / "lonely" / LIBRARY.name
    lonely.parent.mkdir()
    shutil.copy2(LIBRARY, lonely)
    host = compile_c_host(LAST_ERROR_HOST, tmp_path / "last_error_host", link_library=False)
    first_line, message = subprocess.run([host, lonely], capture_output=True, text=True,
                                         check=True).stdout.split("\n", 1)
    assert int(first_line) == codes["TSFFI_ERR_RUNTIME"]
    assert "turbospark_ffi" in message

    window = open_window("--library", str(lonely), "--model", str(SAMPLES / "dflash"))
    event = window.settle()
    assert (event["messageKind"], event["message"]) == ("Library error", message)
    assert event["controlsSensitive"] is False
    assert event["library"] == f"{lonely}: cannot be used"
    assert window.close() == (0, "")


def test_library_that_cannot_be_loaded_shows_the_loader_message(open_window, tmp_path):
    """No library at the path: the loader's own words, and the window still opens."""
    missing = tmp_path / "nowhere" / LIBRARY.name
    window = open_window("--library", str(missing))
    event = window.settle()
    assert event["messageKind"] == "Library error"
    assert str(missing) in event["message"] and "No such file" in event["message"]
    assert window.close() == (0, "")


def test_library_found_through_the_environment_and_the_package(open_window, display, tmp_path):
    """Without --library: $TSFFI_LIBRARY, else the package's own answer to
    `config --libdir` (the turbospark-ffi command, else python3 -m)."""
    window = open_window(env=gui_env(display, TSFFI_LIBRARY=str(LIBRARY)))
    assert window.settle()["library"].endswith(f"\n{LIBRARY}")
    assert window.close() == (0, "")

    # The package in this checkout, found as a person running from it would:
    # python3 on PATH is the interpreter running these tests.
    path = os.pathsep.join([str(Path(os.path.realpath(sys.executable)).parent),
                            os.environ.get("PATH", "")])
    env = gui_env(display, PATH=path)
    asked = None
    for command in (["turbospark-ffi"], ["python3", "-m", "turbospark_ffi"]):
        if shutil.which(command[0], path=path) is None:
            continue
        result = subprocess.run(command + ["config", "--libdir"], capture_output=True,
                                text=True, env=env, cwd=ROOT)
        if result.returncode == 0:
            asked = Path(result.stdout.strip()) / LIBRARY.name
            break
    assert asked is not None and asked.exists(), "the package did not say where its library is"
    window = open_window(env=env, cwd=ROOT)
    event = window.settle()
    assert event["library"].endswith(f"\n{asked}"), event["library"]
    assert (event["messageKind"], event["message"]) == ("", NO_MODEL["message"])
    assert window.close() == (0, "")


def test_screenshot_of_the_dflash_sample(open_window, display, loaded, codes, tmp_path):
    """The window on the DFlash2-only sample under auto, note visible, taken
    from the X screen (the README's picture is a copy of this file), with the
    samples recorded in a store so that the Installed list is there to use."""
    from turbospark_ffi.install_writer import record_install
    store = tmp_path / "store"
    for name in SAMPLE_NAMES:
        record_install(store, f"sample-{name}", SAMPLES / name)
    model = str(SAMPLES / "dflash")
    window = open_window("--library", str(LIBRARY), "--model", model,
                         env=gui_env(display, TURBOSPARK_HOME=str(store)))
    assert window.wait_for("store")["installed"] == [f"sample-{n}" for n in SAMPLE_NAMES]
    event = window.settle()
    assert event["installedSensitive"] is True
    status, answer = library_answer(loaded.lib, model, "auto", "auto")
    assert shown(event) == expected_labels(status, answer, codes)
    assert event["messageKind"] == "Note" and event["message"].startswith(DFLASH_NOTE_START)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    # No window manager: the window sits at the screen's origin, at its size.
    geometry = f"{event['width']}x{event['height']}+0+0"
    subprocess.run([IMPORT, "-display", display, "-window", "root", "-crop", geometry,
                    "+repage", str(SCREENSHOT)], check=True, capture_output=True)
    assert window.close() == (0, "")
    identify = subprocess.run([IDENTIFY, "-format", "%m %w %h %k", str(SCREENSHOT)],
                              capture_output=True, text=True, check=True).stdout.split()
    assert identify[:3] == ["PNG", str(event["width"]), str(event["height"])]
    # A drawn window, not an empty screen: text and widgets make many colours.
    assert int(identify[3]) > 16, identify
