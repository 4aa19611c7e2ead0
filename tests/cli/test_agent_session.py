"""`python -m picourse` end to end: a real HTTP server on localhost plays the model, the
reference tools do the work, the session is saved and replayed offline."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from coursekit import load_lab
from coursekit.layout import COURSE_ROOT
from tests.chapter08.labrun import build
from tests.chat_stream import chunk, sse, tool_call_stream

LAB = load_lab("08")
PATH = "/v1/chat/completions"
# practice.py agent with a server nobody listens on: for what the session says before a turn.
PRACTICE_AGENT = [
    str(COURSE_ROOT / "practice.py"), "agent", "--model", "m",
    "--base-url", "http://127.0.0.1:9/v1",
]  # fmt: skip
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def solved(practice_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    solved = tmp_path_factory.mktemp("agent") / "solved"
    return build(LAB, practice_base, solved, [s.id for s in LAB.stages])


def tool_turn(call_id: str, name: str, arguments: dict[str, Any]) -> Response:
    return sse(*tool_call_stream(call_id, name, json.dumps(arguments), pieces=2))


def text_turn(words: str) -> Response:
    return sse(chunk({"content": words}), chunk({}, "stop"))


class Session:
    """A `python -m picourse` process with its output read line by line."""

    def __init__(self, solved: Path, *args: str, strict_output: bool = False) -> None:
        env = {**os.environ, "PYTHONPATH": str(solved / "src"), "OPENAI_API_KEY": "sk-test"}
        if strict_output:  # as in a UTF-8 locale a student's machine has (here: C, lenient)
            env["PYTHONIOENCODING"] = "utf-8:strict"
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-m", "picourse", *args],
            cwd=solved,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="surrogateescape",  # a name that is not UTF-8, printed as its bytes
            bufsize=1,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.cursor = 0  # where the next wait_for starts looking
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := self.process.stdout.read(1):
            self.lines.put(chunk)
        self.lines.put("")

    @classmethod
    def against(
        cls,
        server: HTTPServer,
        directory: Path,
        workspace: Path,
        saved: Path,
        strict_output: bool = False,
    ) -> Session:
        """A session whose model is the test server, saving its log under ``saved``."""
        return cls(
            directory, "--model", "m", "--base-url", server.url_for("/v1"),
            "--workspace", str(workspace), "--sessions", str(saved), strict_output=strict_output,
        )  # fmt: skip

    def wait_for(self, text: str, timeout: float = 120) -> str:
        """Everything printed until the next ``text`` appears (after the last one found)."""
        while (found := "".join(self.seen).find(text, self.cursor)) < 0:
            try:
                piece = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"no {text!r} within {timeout} s; the session printed: {''.join(self.seen)}"
                ) from None
            if piece == "":
                raise AssertionError(f"session ended before {text!r}: {''.join(self.seen)}")
            self.seen.append(piece)
        self.cursor = found + len(text)
        return "".join(self.seen)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def finish(self) -> str:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=120)
        while (piece := self.lines.get(timeout=30)) != "":
            self.seen.append(piece)
        assert code == 0, "".join(self.seen)
        return "".join(self.seen)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def test_a_real_session_reads_edits_runs_bash_and_replays_offline(
    solved: Path, server: HTTPServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "greeting.txt").write_text("helo world\n")
    for response in (
        tool_turn("c1", "read", {"path": "greeting.txt"}),
        tool_turn("c2", "edit", {"path": "greeting.txt", "old_text": "helo", "new_text": "hello"}),
        tool_turn("c3", "bash", {"command": "cat greeting.txt"}),
        text_turn("Fixed the typo."),
    ):
        server.expect_ordered_request(PATH).respond_with_response(response)
    sessions = tmp_path / "sessions"
    session = Session.against(server, solved, workspace, sessions)
    try:
        session.wait_for("you> ")
        session.send("fix the typo in greeting.txt")
        session.wait_for("Allow?")
        session.send("y")  # the edit, through the Lab 8.8 gate
        session.wait_for("wants to run")
        session.wait_for("Allow?", timeout=60)
        session.send("y")  # the bash command
        shown = session.wait_for("Fixed the typo.")
        output = session.finish()
    finally:
        session.kill()
    assert (workspace / "greeting.txt").read_text() == "hello world\n", output
    assert "hello world" in shown, "bash's output is shown"
    requests = [json.loads(entry[0].get_data()) for entry in server.log]
    assert len(requests) == 4
    last = requests[-1]["messages"]
    assert [m["role"] for m in last] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool"
    ]  # fmt: skip
    assert "hello world" in last[-1]["content"]
    (log,) = sessions.glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = [r["type"] for r in records]
    assert kinds[:2] == ["session", "user"] and kinds.count("assistant") == 4
    assert kinds.count("toolResult") == 3

    again = tmp_path / "again"
    again.mkdir()
    (again / "greeting.txt").write_text("helo world\n")
    replay = Session(solved, "--replay", str(log), "--workspace", str(again))
    try:
        replay.wait_for("Allow?")
        replay.send("y")
        replay.wait_for("wants to run")
        replay.wait_for("Allow?", timeout=60)
        replay.send("y")
        replayed = replay.finish()
    finally:
        replay.kill()
    assert (again / "greeting.txt").read_text() == "hello world\n", replayed
    calls = [line for line in output.splitlines() if line.startswith("→ ")]
    assert calls and calls == [line for line in replayed.splitlines() if line.startswith("→ ")]


SLEEPER_COMMAND = "sleep 300 & echo $! > sleeper.pid; wait"


def start_a_sleeper(session: Session, workspace: Path) -> psutil.Process:
    """Ask for the bash call of SLEEPER_COMMAND, allow it, and return its sleep once it runs."""
    session.wait_for("you> ")
    session.send("start something long")
    session.wait_for("Allow?")
    session.send("y")
    pid_file = workspace / "sleeper.pid"
    started = threading.Event()

    def watch_for_pid() -> None:
        while not (pid_file.exists() and pid_file.read_text().strip()):
            if session.process.poll() is not None:
                return
            threading.Event().wait(0.02)
        started.set()

    threading.Thread(target=watch_for_pid, daemon=True).start()
    assert started.wait(60), "the bash call never started: " + "".join(session.seen)
    return psutil.Process(int(pid_file.read_text()))


def test_ctrl_c_aborts_the_turn_and_its_bash_call_but_not_the_session(
    solved: Path, server: HTTPServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server.expect_ordered_request(PATH).respond_with_response(
        tool_turn("c1", "bash", {"command": SLEEPER_COMMAND})
    )
    server.expect_ordered_request(PATH).respond_with_response(text_turn("Still here."))
    session = Session.against(server, solved, workspace, tmp_path / "sessions")
    sleeper: psutil.Process | None = None
    try:
        sleeper = start_a_sleeper(session, workspace)
        session.process.send_signal(signal.SIGINT)
        session.wait_for("[aborted]")
        session.wait_for("you> ", timeout=60)
        gone, _ = psutil.wait_procs([sleeper], timeout=10)
        assert gone, "the aborted bash call's process must be ended"
        session.send("are you there?")
        session.wait_for("Still here.")
        output = session.finish()
    finally:
        session.kill()
        if sleeper is not None and sleeper.is_running():
            sleeper.kill()
    assert output.count("you> ") >= 2, "Ctrl-C ended the turn, not the session"


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_session_ended_by_a_signal_ends_its_bash_calls_first(
    solved: Path, server: HTTPServer, tmp_path: Path, ending: signal.Signals
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server.expect_ordered_request(PATH).respond_with_response(
        tool_turn("c1", "bash", {"command": SLEEPER_COMMAND})
    )
    session = Session.against(server, solved, workspace, tmp_path / "sessions")
    sleeper: psutil.Process | None = None
    try:
        sleeper = start_a_sleeper(session, workspace)
        session.process.send_signal(ending)
        code = session.process.wait(timeout=60)
        # The session waited for the bash call to end its group: nothing of it is left.
        assert not sleeper.is_running() or sleeper.status() == psutil.STATUS_ZOMBIE, (
            f"a session ended by {ending.name} must abort its turn first, so the command's "
            "process group ends with it"
        )
        output = session.wait_for(f"Session ended by {ending.name}.")
        assert code == 128 + ending, output
    finally:
        session.kill()
        if sleeper is not None and sleeper.is_running():
            sleeper.kill()


def test_practice_agent_leaves_out_the_stages_still_on_their_stub(
    practice_base: Path, tmp_path: Path
) -> None:
    partial = build(LAB, practice_base, tmp_path / "partial", ["8.1", "8.2"])
    result = subprocess.run(
        [sys.executable, *PRACTICE_AGENT],
        cwd=partial, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Tools: read\n" in result.stdout
    for name in ("write", "edit", "bash", "ls", "glob"):
        assert f"left out: {name} (" in result.stdout and "not implemented yet" in result.stdout
    assert "plain y/N" in result.stdout, "without Lab 8.8, changes ask a plain y/N"
    assert (partial / "playground").is_dir(), "the default workspace is playground/"
    none = subprocess.run(
        [sys.executable, str(COURSE_ROOT / "practice.py"), "agent", "--model", "m"],
        cwd=build(LAB, practice_base, tmp_path / "unsolved", []),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert none.returncode == 2 and "solve Lab 8.1 first" in none.stderr


def test_without_lab_8_8_every_change_asks_a_plain_y_n(
    server: HTTPServer, practice_base: Path, tmp_path: Path
) -> None:
    core_stages = [s.id for s in LAB.stages if not s.optional]
    core = build(LAB, practice_base, tmp_path / "core", core_stages)
    workspace = tmp_path / "ws"
    server.expect_ordered_request(PATH).respond_with_response(
        tool_turn("c1", "write", {"path": "a.txt", "content": "declined\n"})
    )
    server.expect_ordered_request(PATH).respond_with_response(
        tool_turn("c2", "write", {"path": "b.txt", "content": "allowed\n"})
    )
    server.expect_ordered_request(PATH).respond_with_response(text_turn("Done."))
    session = Session.against(server, core, workspace, tmp_path / "sessions")
    try:
        session.wait_for("you> ")
        session.send("write two files")
        session.wait_for("allow? [y/N]")
        session.send("n")
        session.wait_for("allow? [y/N]")
        session.send("y")
        session.wait_for("Done.")
        session.finish()
    finally:
        session.kill()
    assert not (workspace / "a.txt").exists(), "a declined change never happens"
    assert (workspace / "b.txt").read_text() == "allowed\n"
    second = json.loads(server.log[1][0].get_data())["messages"]
    assert "declined" in second[-1]["content"], "the model is told the user declined"


def test_ctrl_c_at_the_first_prompt_of_practice_agent_ends_the_session(
    practice_base: Path, tmp_path: Path
) -> None:
    partial = build(LAB, practice_base, tmp_path / "partial", ["8.1", "8.2"])
    process = subprocess.Popen(
        [sys.executable, "-u", *PRACTICE_AGENT],
        cwd=partial, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    seen: list[str] = []
    prompted = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        while piece := process.stdout.read(1):
            seen.append(piece)
            if "".join(seen[-5:]) == "you> ":
                prompted.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert prompted.wait(120), "no prompt: " + "".join(seen)
        os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("Ctrl-C at the prompt was ignored: " + "".join(seen)) from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        reader.join(5)
    assert "Traceback" not in "".join(seen), "".join(seen)


@pytest.mark.parametrize(
    ("replay", "says"),
    [
        ("missing.jsonl", "cannot read the saved session"),
        (".", "cannot read the saved session"),
        ("bad.jsonl", "is not a session record"),
    ],
)
def test_a_bad_replay_file_is_a_clear_error(
    solved: Path, tmp_path: Path, replay: str, says: str
) -> None:
    (tmp_path / "bad.jsonl").write_text('{"type": "user"}\n')
    result = subprocess.run(
        [sys.executable, "-m", "picourse", "--replay", str(tmp_path / replay),
         "--workspace", str(tmp_path / "ws")],
        cwd=solved, env={**os.environ, "PYTHONPATH": str(solved / "src")},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_workspace_that_is_a_file_is_a_clear_error(solved: Path, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = subprocess.run(
        [sys.executable, "-m", "picourse", "--model", "m", "--workspace", str(afile)],
        cwd=solved, env={**os.environ, "PYTHONPATH": str(solved / "src")},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "cannot use" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("gate", ["8.8", "plain"])
def test_ctrl_c_at_a_confirmation_ends_it_and_the_next_line_reaches_the_prompt(
    server: HTTPServer, practice_base: Path, tmp_path: Path, gate: str
) -> None:
    stages = [s.id for s in LAB.stages if gate == "8.8" or not s.optional]
    practice = build(LAB, practice_base, tmp_path / "practice", stages)
    workspace = tmp_path / "ws"
    server.expect_ordered_request(PATH).respond_with_response(
        tool_turn("c1", "write", {"path": "a.txt", "content": "never\n"})
    )
    server.expect_ordered_request(PATH).respond_with_response(text_turn("Still here."))
    session = Session.against(server, practice, workspace, tmp_path / "sessions")
    try:
        session.wait_for("you> ")
        session.send("write a file")
        session.wait_for("[y/N]")
        session.process.send_signal(signal.SIGINT)
        session.wait_for("[aborted]")
        session.wait_for("you> ", timeout=60)
        session.send("are you there?")
        session.wait_for("Still here.", timeout=60)
        output = session.finish()
    finally:
        session.kill()
    assert not (workspace / "a.txt").exists(), "an interrupted question changes nothing"
    assert "did not stop within" not in output, "the question ends at once, not after a grace"


def test_practice_agent_offers_the_solved_extensions(practice_base: Path, tmp_path: Path) -> None:
    everything = build(LAB, practice_base, tmp_path / "all", [s.id for s in LAB.stages])
    result = subprocess.run(
        [sys.executable, *PRACTICE_AGENT],
        cwd=everything, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Tools: read, write, edit, bash, ls, glob\n" in result.stdout, result.stdout
    assert "careful edits are on" in result.stdout and "left out" not in result.stdout


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file systems refuse names not UTF-8")
def test_a_file_name_that_is_not_utf_8_reaches_the_model_the_screen_and_the_log(
    solved: Path, server: HTTPServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")  # \udce9 in Python
    server.expect_ordered_request(PATH).respond_with_response(tool_turn("c1", "ls", {}))
    server.expect_ordered_request(PATH).respond_with_response(text_turn("One file."))
    sessions = tmp_path / "sessions"
    session = Session.against(server, solved, workspace, sessions, strict_output=True)
    try:
        session.wait_for("you> ")
        session.send(os.fsdecode(b"what is here, caf\xe9?"))  # typed in Latin-1
        session.wait_for("One file.")
        output = session.finish()
    finally:
        session.kill()
    requests = [json.loads(entry[0].get_data()) for entry in server.log]
    assert requests[0]["messages"][-1]["content"] == "what is here, caf\\xe9?"
    assert "caf\\xe9.txt" in requests[-1]["messages"][-1]["content"], (
        "ls's result reaches the model, the byte that is not UTF-8 escaped"
    )
    (log,) = sessions.glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    (listed,) = [r for r in records if r["type"] == "toolResult"]
    assert os.fsdecode(b"caf\xe9.txt") in listed["text"], "the log keeps the name as it is"
    assert os.fsdecode(b"caf\xe9.txt") in output, (
        "the screen shows the name's own bytes, as ls does"
    )
