"""Drive your own tools with a real model: an interactive session, saved, replayable.

    python -m picourse --model NAME [--workspace DIR] [--base-url URL]
    python -m picourse --replay SESSION.jsonl [--workspace DIR]

The model is any OpenAI-compatible server (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``; see
``picourse.openai_model``). The tools are yours: a stage still on its stub is left out with
a one-line note. Workspace containment is on. Every change (write, edit, bash) asks first:
through your Lab 8.8 gate when it is solved, else a plain y/N. Ctrl-C aborts the current
turn, not the session; Ctrl-D (or Ctrl-C at the prompt) ends it. SIGTERM or SIGHUP (a
closed terminal) during a turn aborts it, so the commands it started end too, then ends
the session.

Each session is saved as JSONL (one record per line: the session, each user message, each
assistant message with its tool calls and token usage, each tool result). ``--replay``
turns a saved session into a scripted model: the same tool calls run again, offline,
against the tools as they are now.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import io
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TextIO, cast

from picourse.abort import AbortController
from picourse.agent_loop import AgentContext, AgentEvent, run_agent_loop
from picourse.coding_tools.approval import Confirm
from picourse.messages import (
    Message,
    TextContent,
    ToolCall,
    user_message,
)
from picourse.model import Model
from picourse.openai_model import OpenAIChatModel
from picourse.scripted_model import ScriptedModel
from picourse.session_log import SessionError, SessionLog, load_replay
from picourse.tool import Tool, ToolContext, ToolOutput, ToolRegistry, execute_tool_call

MUTATING_TOOLS = ("write", "edit", "bash")
SHOWN_RESULT_LINES = 12
NOT_IMPLEMENTED = "is not implemented yet"
# One harmless call per tool, run in a scratch workspace to tell a stub from real work.
PROBES: dict[str, dict[str, str]] = {
    "read": {"path": "probe.txt"},
    "write": {"path": "written.txt", "content": "x\n"},
    "edit": {"path": "probe.txt", "old_text": "probe", "new_text": "edited"},
    "bash": {"command": "true"},
    "ls": {"path": "."},
    "glob": {"pattern": "*.txt"},
}
Ask = Callable[[str], Awaitable[str]]


# ------------------------------------------------------------------ the student's tools


def students_tools(
    workspace: Path, reader: _LineReader, loop: asyncio.AbstractEventLoop
) -> tuple[ToolRegistry, list[str]]:
    """The registry of the student's own tools, the stubs left out, and why each was."""
    from picourse.coding_tools import create_coding_tools  # the lab: may be half done

    notes: list[str] = []
    ask = reader.ask
    gate = _solved_gate(cast(TextIO, reader))  # it only calls readline()
    careful = _careful_edits_solved()
    # ls and glob (Lab 8.7) are offered like the others: left out below while on their stub.
    registry = create_coding_tools(
        workspace, "workspace", navigation=True, confirm=gate, careful_edits=careful
    )
    with tempfile.TemporaryDirectory(prefix="picourse-probe-") as scratch:
        Path(scratch, "probe.txt").write_text("probe\n", encoding="utf-8")
        missing = loop.run_until_complete(_stubbed_tools(registry, scratch))
    kept = []
    for tool in registry.list():
        if tool.name in missing:
            notes.append(f"left out: {tool.name} ({missing[tool.name]})")
        elif gate is None and tool.name in MUTATING_TOOLS:
            kept.append(_asking(tool, ask))
        else:
            kept.append(tool)
    if gate is None:
        notes.append("changes ask a plain y/N (solve Lab 8.8 to see diffs before they happen)")
    if careful:
        notes.append("careful edits are on (Lab 8.9): a file is read before it is edited")
    return ToolRegistry(kept), notes


def _careful_edits_solved() -> bool:
    """Whether Lab 8.9 is solved: its ledger and its edit work on a tiny case."""
    try:
        from picourse.coding_tools.careful_edit import ReadLedger, apply_careful_edits
        from picourse.coding_tools.details import Edit

        ReadLedger()
        apply_careful_edits(b"a\n", [Edit("a", "b")], "probe.txt")
    except NotImplementedError:
        return False
    return True


def _solved_gate(answers: TextIO) -> Confirm | None:
    """The Lab 8.8 terminal confirmer when that stage is solved, else None."""
    try:
        from picourse.coding_tools.confirm import diff_preview, terminal_confirmer

        diff_preview("probe.txt", "a\n", "b\n")
        return terminal_confirmer(answers=answers)
    except NotImplementedError:
        return None


async def _stubbed_tools(registry: ToolRegistry, scratch: str) -> dict[str, str]:
    """Run each tool once in a scratch workspace: a stub answers 'not implemented yet'."""
    from picourse.coding_tools import create_coding_tools

    found: dict[str, str] = {}
    probe_tools = create_coding_tools(scratch, "workspace", navigation=True)
    for tool in registry.list():
        if tool.name not in PROBES:
            continue
        call = ToolCall(f"probe-{tool.name}", tool.name, PROBES[tool.name])
        result = await execute_tool_call(call, probe_tools)
        if NOT_IMPLEMENTED in result.text:
            found[tool.name] = result.text.strip().splitlines()[-1][:120]
    return found


def _asking(tool: Tool, ask: Ask) -> Tool:
    """``tool`` behind a plain y/N question (when the 8.8 gate is not built yet)."""

    async def execute(params: Any, ctx: ToolContext) -> ToolOutput:
        shown = params.get("command") or params.get("path") or ""
        question = asyncio.ensure_future(ask(f"{tool.name} {shown!s:.200} — allow? [y/N] "))
        # Ctrl-C ends the question at once (the turn's abort), not after the tools' grace.
        remove = ctx.signal.add_listener(question.cancel) if ctx.signal is not None else None
        try:
            answer = await question
        except asyncio.CancelledError:
            if ctx.signal is None or not ctx.signal.aborted:
                raise
            return ToolOutput([TextContent("Interrupted before the user answered.")], is_error=True)
        finally:
            if remove is not None:
                remove()
        if str(answer).strip().lower() not in {"y", "yes"}:
            return ToolOutput([TextContent("The user declined this change.")], is_error=True)
        return await tool.execute(params, ctx)

    return dataclasses.replace(tool, execute=execute)


# ------------------------------------------------------------------ the session


class Session:
    def __init__(
        self,
        model: Model,
        tools: ToolRegistry,
        workspace: Path,
        log: SessionLog | None,
        out: TextIO,
        max_steps: int = 50,
    ) -> None:
        self.model = model
        self.tools = tools
        self.workspace = workspace
        self.log = log
        self.out = out
        self.max_steps = max_steps
        self.messages: list[Message] = []
        self.system_prompt = _system_prompt(workspace, tools)

    async def turn(self, text: str, controller: AbortController) -> str:
        """One user message to the end of the model's answer; returns how it ended."""
        request = user_message(text)
        if self.log is not None:
            self.log.message(request)
        run = await run_agent_loop(
            model=self.model,
            tools=self.tools,
            context=AgentContext([*self.messages, request], self.system_prompt),
            signal=controller.signal,
            max_steps=self.max_steps,
            on_event=self._show,
        )
        self.messages = list(run.messages)
        if run.reason == "error" and run.error:
            self.out.write(f"\n[error] {run.error}\n")
        elif run.reason not in ("stop",):
            self.out.write(f"\n[{run.reason}]\n")
        self.out.flush()
        return run.reason

    def _show(self, event: AgentEvent) -> None:
        if event.type == "message" and event.message is not None:
            usage = getattr(self.model, "usage", None)
            if self.log is not None:
                self.log.message(event.message, usage)
            streamed = isinstance(self.model, OpenAIChatModel) and self.model.stream
            if not streamed and event.message.text:
                self.out.write(event.message.text)
            self.out.write("\n")
        elif event.type == "tool_start" and event.tool_call is not None:
            call = event.tool_call
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            self.out.write(f"→ {call.name} {arguments[:300]}\n")
        elif event.type == "tool_end" and event.result is not None:
            result = event.result
            if self.log is not None:
                self.log.message(result)
            lines = result.text.splitlines()
            mark = "✗" if result.is_error else "✓"
            for line in lines[:SHOWN_RESULT_LINES]:
                self.out.write(f"  {mark} {line}\n")
            if len(lines) > SHOWN_RESULT_LINES:
                self.out.write(f"  … {len(lines) - SHOWN_RESULT_LINES} more lines\n")
        self.out.flush()


def _system_prompt(workspace: Path, tools: ToolRegistry) -> str:
    try:
        from picourse.coding_tools.agent import build_system_prompt

        return build_system_prompt(str(workspace), tools)
    except NotImplementedError:
        names = ", ".join(tool.name for tool in tools.list())
        return f"You are a coding agent working in {workspace}. Tools: {names}."


# ------------------------------------------------------------------ the command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m picourse",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL"), help="model name")
    parser.add_argument("--base-url", help="server address (default: $OPENAI_BASE_URL)")
    parser.add_argument(
        "--workspace", type=Path, default=Path("playground"), help="where the tools work"
    )
    parser.add_argument("--replay", type=Path, help="rerun a saved session offline")
    parser.add_argument(
        "--sessions", type=Path, default=Path(".practice/sessions"), help="where to save"
    )
    parser.add_argument("--no-stream", action="store_true", help="ask for whole replies")
    parser.add_argument("--max-steps", type=int, default=50)
    args = parser.parse_args(argv)
    out = sys.stdout
    # A file name that is not UTF-8 (lone surrogates in Python) is printed as its own bytes,
    # as ls prints it, and such bytes typed at the prompt are read the same way, instead of
    # ending the session in a UTF-8 locale.
    for stream in (out, sys.stdin):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="surrogateescape")
    try:
        return _run(args, out)
    except SessionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, out: TextIO) -> int:
    workspace = args.workspace.expanduser().resolve()
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SessionError(
            f"cannot use {workspace} as the workspace ({error.strerror or error}); "
            "name a folder with --workspace"
        ) from None
    # One event loop for the whole session: the HTTP client lives across turns.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    reader = _LineReader(loop, out)
    tools, notes = students_tools(workspace, reader, loop)
    if not tools.list():
        raise SessionError("none of your tools is implemented yet: solve Lab 8.1 first")
    replay: list[str] | None = None
    model: Model
    if args.replay is not None:
        replay, turns = load_replay(args.replay)
        model = ScriptedModel(turns)
        log = None
    else:
        if not args.model:
            raise SessionError("name the model: --model NAME (or set OPENAI_MODEL)")
        model = OpenAIChatModel(
            args.model,
            base_url=args.base_url,
            stream=not args.no_stream,
            on_text=_echo_to(out),
        )
        stamp = time.strftime("%Y%m%d-%H%M%S")
        log = SessionLog(args.sessions / f"{stamp}-{os.getpid()}.jsonl")
        log.write({"type": "session", "model": args.model, "workspace": str(workspace)})
    session = Session(model, tools, workspace, log, out, args.max_steps)
    out.write(f"Workspace: {workspace}\nTools: {', '.join(t.name for t in tools.list())}\n")
    for note in notes:
        out.write(f"  {note}\n")
    if log is not None:
        out.write(f"Saving to {log.path}\n")
    out.flush()
    ended_by: list[signal.Signals] = []
    try:
        for text in replay if replay is not None else _prompts(reader):
            if replay is not None:
                out.write(f"you> {text}\n")
            controller = AbortController()
            reader.new_turn()
            controller.signal.add_listener(reader.interrupt)
            loop.add_signal_handler(signal.SIGINT, controller.abort, "interrupted")
            for ending in _ENDING_SIGNALS:
                loop.add_signal_handler(ending, _end_turn, controller, ending, ended_by)
            try:
                loop.run_until_complete(session.turn(text, controller))
            finally:
                for handled in (signal.SIGINT, *_ENDING_SIGNALS):
                    loop.remove_signal_handler(handled)
            if ended_by:
                out.write(f"Session ended by {ended_by[0].name}.\n")
                return 128 + ended_by[0]
    finally:
        if log is not None:
            log.close()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    return 0


# Signals that end the whole session (a closed terminal, a kill, a supervisor). During a turn
# they abort it first, so every command the tools started ends with it (bash runs each in a
# process group of its own, which the process's own death would leave running); at the
# prompt nothing runs, and their default action ends the process.
_ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _end_turn(
    controller: AbortController, ending: signal.Signals, ended_by: list[signal.Signals]
) -> None:
    ended_by.append(ending)
    controller.abort(f"ended by {ending.name}")


def _echo_to(out: TextIO) -> Callable[[str], None]:
    def echo(piece: str) -> None:
        out.write(piece)
        out.flush()

    return echo


def _prompts(reader: _LineReader) -> Iterator[str]:
    while True:
        try:
            line = reader.read_blocking("you> ")
        except (EOFError, KeyboardInterrupt):
            reader.out.write("\n")
            return
        if line.strip():
            yield line.strip()


class _LineReader:
    """Lines from stdin, at the prompt (blocking) and inside a turn (on the event loop,
    so Ctrl-C can still abort the turn while a question waits)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, out: TextIO) -> None:
        self.loop = loop
        self.out = out
        self._lock = threading.Lock()
        self._waiting: set[concurrent.futures.Future[str]] = set()
        self._interrupted = False

    def readline(self) -> str:
        """A line for the Lab 8.8 confirmer, which reads its answer in a worker thread: it
        is read on the loop, so that an abort ends the wait at once (and the line typed
        next goes to the prompt, not to a forgotten question). '' when aborted: declined."""
        future = asyncio.run_coroutine_threadsafe(self.ask(""), self.loop)
        with self._lock:
            self._waiting.add(future)
            if self._interrupted:
                future.cancel()
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            return ""
        finally:
            with self._lock:
                self._waiting.discard(future)

    def new_turn(self) -> None:
        with self._lock:
            self._interrupted = False

    def interrupt(self) -> None:
        """The turn was aborted: every question still waiting is answered ''."""
        with self._lock:
            self._interrupted = True
            waiting = list(self._waiting)
        for future in waiting:
            future.cancel()

    def read_blocking(self, prompt: str) -> str:
        self.out.write(prompt)
        self.out.flush()
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line

    async def ask(self, prompt: str) -> str:
        self.out.write(prompt)
        self.out.flush()
        ready: asyncio.Future[str] = self.loop.create_future()

        def on_readable() -> None:
            if not ready.done():
                ready.set_result(sys.stdin.readline())

        fd = sys.stdin.fileno()
        self.loop.add_reader(fd, on_readable)
        try:
            return await ready
        finally:
            self.loop.remove_reader(fd)
