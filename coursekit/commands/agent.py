"""agent: talk to a real model that uses your own tools (python -m picourse, in this directory).

The model is any OpenAI-compatible server: set OPENAI_BASE_URL (and OPENAI_API_KEY where the
server needs one) and name the model with --model. The tools work in --workspace (default:
playground/ in the practice directory); sessions are saved under .practice/sessions/ and
--replay FILE reruns one offline against your tools as they are now.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from coursekit.commands._common import add_dir_option, practice_dir


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "agent",
        help="drive your own tools with a real model",
        epilog="The server and key come from OPENAI_BASE_URL and OPENAI_API_KEY (a local "
        "server takes any key). Sessions are saved under .practice/sessions/.",
    )
    parser.add_argument("--model", help="the model's name on the server (or set OPENAI_MODEL)")
    parser.add_argument(
        "--base-url", help="the server, e.g. http://localhost:11434/v1 (default: $OPENAI_BASE_URL)"
    )
    parser.add_argument(
        "--workspace", type=Path, help="where the tools work (default: playground/ in here)"
    )
    parser.add_argument("--replay", type=Path, help="rerun a saved session offline")
    parser.add_argument("--no-stream", action="store_true", help="ask for whole replies")
    add_dir_option(parser)


def run(args: argparse.Namespace) -> int:
    directory = practice_dir(args)
    command = [sys.executable, "-m", "picourse"]
    workspace = args.workspace or directory.root / "playground"
    command += ["--workspace", str(workspace.expanduser().resolve())]
    for option, value in (("--model", args.model), ("--base-url", args.base_url)):
        if value:
            command += [option, value]
    if args.replay:
        command += ["--replay", str(args.replay.expanduser().resolve())]
    if args.no_stream:
        command.append("--no-stream")
    env = {**os.environ, "PYTHONPATH": str(directory.root / "src")}
    # Ctrl-C belongs to the session (it aborts the current turn); practice.py just waits.
    # A handler that does nothing, not SIG_IGN: an ignored SIGINT would be inherited, and
    # the session's Python would then never see Ctrl-C at its prompt.
    previous = signal.signal(signal.SIGINT, lambda number, frame: None)
    try:
        return subprocess.run(command, cwd=directory.root, env=env, check=False).returncode
    finally:
        signal.signal(signal.SIGINT, previous)
