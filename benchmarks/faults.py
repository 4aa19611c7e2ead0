"""Fault injection against the reference write and edit tools; prints the counts.

    python benchmarks/faults.py [--kills N] [--edits N] [--trials N] [--json] [--only a,b]

Scenarios (every count named lost, corrupt, leaked, hung or escaped must be 0):
- kills: SIGKILL a process in the middle of writes of a 4 MiB file, N times; the file must
  always hold one whole version, and the next write in the directory must remove the temp
  files the killed writer left (temps_left_by_kills counts them before that write).
- processes: 2 processes edit one file, --edits each; every edit reported applied is there.
- loops: the same with 2 event loops (threads) of one process.
- cancelled: a write cancelled while its thread runs, then an edit: the edit is never lost.
- special: write and edit of a FIFO (no writer, and fed by `yes`), of /dev/zero through a
  symlink and of a socket end within a second with an error, and change nothing.
- stale: the next write removes the temp file of a dead writer (leaked) and keeps a live one.
- metadata: write and edit keep mode, extended attributes and (as root) owner and group.
- fuzz: hypothesis-generated paths, contents and edit texts (surrogates, NUL, deep and
  huge values): every call returns a result, no exception escapes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VERSION_BYTES = 4 << 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--edits", type=int, default=300)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--fuzz", type=int, default=300, help="hypothesis examples per tool")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        solved, mode, path, count = options.worker
        sys.path.insert(0, solved)
        return worker(mode, Path(path), int(count))
    work = Path(tempfile.mkdtemp(prefix="faults-"))
    try:
        solved = _solution(work)
        scenarios = {
            "kills": lambda: kills(work, solved, options.kills),
            "processes": lambda: processes(work, solved, options.edits),
            "loops": lambda: loops(work, options.edits),
            "cancelled": lambda: cancelled(work, options.trials),
            "special": lambda: special(work),
            "fuzz": lambda: fuzz(work, options.fuzz),
            "stale": lambda: stale(work),
            "metadata": lambda: metadata(work),
        }
        chosen = [name for name in options.only.split(",") if name] or list(scenarios)
        results = {name: scenarios[name]() for name in chosen}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if options.json:
        print(json.dumps(results))
    else:
        for name, counts in results.items():
            print(f"{name:<10} " + "  ".join(f"{key}={value}" for key, value in counts.items()))
    bad = ("lost", "corrupt", "leaked", "hung", "escaped", "changed")
    return 1 if any(v for c in results.values() for k, v in c.items() if k in bad) else 0


def _solution(work: Path) -> str:
    sys.path.insert(0, str(ROOT))
    from coursekit import assemble_practice_dir, load_lab

    lab = load_lab("08")
    solved = assemble_practice_dir(lab, work / "solved", solved_stages=[s.id for s in lab.stages])
    source = str(solved / "src")
    sys.path.insert(0, source)
    return source


async def call(workspace: Path, name: str, arguments: dict[str, Any], **kw: Any) -> Any:
    from picourse.coding_tools import create_coding_tools
    from picourse.tool import ToolContext

    tool = create_coding_tools(workspace, "unrestricted").get(name)
    assert tool is not None
    params = tool.schema.validate(arguments)
    return await tool.execute(params, ToolContext(f"faults-{name}", kw.get("signal")))


def version(n: int) -> bytes:
    """A self-checking file content: a header with the hash of the body."""
    body = (b"%08d " % n) * (VERSION_BYTES // 9)
    return hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def whole(data: bytes) -> bool:
    head, _, body = data.partition(b"\n")
    return hashlib.sha256(body).hexdigest().encode() == head


def worker(mode: str, path: Path, count: int) -> int:
    """Runs in a child process: writes versions, or edits its own marker lines."""

    async def work() -> None:
        for n in range(count):
            if mode == "write":
                content = version(n).decode()
                await call(path.parent, "write", {"path": path.name, "content": content})
            else:
                out = await call(
                    path.parent,
                    "edit",
                    {"path": path.name, "old_text": f"{mode}{n}\n", "new_text": f"{mode}{n}!\n"},
                )
                print("ok" if not out.is_error else "error", flush=True)
            if mode == "write":
                print(n, flush=True)

    asyncio.run(work())
    return 0


def _spawn(solved: str, mode: str, path: Path, count: int) -> subprocess.Popen[str]:
    command = [sys.executable, __file__, "--worker", solved, mode, str(path), str(count)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def kills(work: Path, solved: str, rounds: int) -> dict[str, int]:
    folder = work / "kills"
    folder.mkdir()
    target = folder / "data.txt"
    target.write_bytes(version(0))
    corrupt = leaked = stale = 0
    for round_number in range(rounds):
        child = _spawn(solved, "write", target, 1000)
        try:
            assert child.stdout is not None
            for _ in range(random.randint(0, 3)):  # let it finish a few writes first
                child.stdout.readline()
            time.sleep(random.uniform(0, 0.02))  # then kill it anywhere in the next one
        finally:
            child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()
        corrupt += not whole(target.read_bytes())
        stale += len({p.name for p in folder.iterdir()} - {"data.txt", "next.txt"})
        asyncio.run(call(folder, "write", {"path": "next.txt", "content": str(round_number)}))
        leaked += len({p.name for p in folder.iterdir()} - {"data.txt", "next.txt"})
    return {"kills": rounds, "temps_left_by_kills": stale, "corrupt": corrupt, "leaked": leaked}


def processes(work: Path, solved: str, edits: int) -> dict[str, int]:
    path = _markers(work / "processes", edits)
    children = [_spawn(solved, prefix, path, edits) for prefix in "ab"]
    reported = 0
    try:
        for child in children:
            out, _ = child.communicate(timeout=600)
            reported += out.split().count("ok")
    finally:
        for child in children:
            child.kill()
            child.wait()
    return {"reported": reported, "lost": reported - _applied(path)}


def loops(work: Path, edits: int) -> dict[str, int]:
    path = _markers(work / "loops", edits)
    reported: list[int] = []

    def agent(prefix: str) -> None:
        async def run() -> int:
            ok = 0
            for n in range(edits):
                arguments = {"path": path.name, "old_text": f"{prefix}{n}\n"}
                out = await call(path.parent, "edit", {**arguments, "new_text": f"{prefix}{n}!\n"})
                ok += not out.is_error
            return ok

        reported.append(asyncio.run(run()))

    threads = [threading.Thread(target=agent, args=(prefix,)) for prefix in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"reported": sum(reported), "lost": sum(reported) - _applied(path)}


def _markers(folder: Path, edits: int) -> Path:
    folder.mkdir()
    path = folder / "markers.txt"
    path.write_text("".join(f"a{n}\nb{n}\n" for n in range(edits)))
    return path


def _applied(path: Path) -> int:
    return sum(line.endswith("!") for line in path.read_text().splitlines())


def cancelled(work: Path, trials: int) -> dict[str, int]:
    folder = work / "cancelled"
    folder.mkdir()
    lost = 0

    async def trial(n: int) -> bool:
        (folder / "f.txt").write_text("X\n")
        content = "X\n" + "y" * (8 << 20)
        writing = asyncio.create_task(call(folder, "write", {"path": "f.txt", "content": content}))
        await asyncio.sleep(random.uniform(0, 0.01))
        writing.cancel()
        edit = {"path": "f.txt", "old_text": "X\n", "new_text": "Z\n"}
        out = await call(folder, "edit", edit)
        with contextlib.suppress(asyncio.CancelledError):
            await writing
        return not out.is_error and not (folder / "f.txt").read_bytes().startswith(b"Z\n")

    for n in range(trials):
        lost += asyncio.run(trial(n))
    return {"trials": trials, "lost": lost}


def special(work: Path) -> dict[str, int]:
    folder = work / "special"
    folder.mkdir()
    os.mkfifo(folder / "fifo")
    os.mkfifo(folder / "fed")
    os.symlink("/dev/zero", folder / "zero")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "sock"))
    feeder = subprocess.Popen(f"exec yes > {folder / 'fed'}", shell=True)
    hung = changed = errors = 0
    try:
        for name in ("fifo", "fed", "zero", "sock"):
            for tool, arguments in (
                ("write", {"content": "x"}),
                ("edit", {"old_text": "y", "new_text": "z"}),
            ):
                before = os.lstat(folder / name)
                start = time.monotonic()
                out = asyncio.run(
                    asyncio.wait_for(call(folder, tool, {"path": name, **arguments}), 5)
                )
                hung += time.monotonic() - start > 1
                errors += out.is_error
                after = os.lstat(folder / name)
                changed += (before.st_ino, stat.S_IFMT(before.st_mode)) != (
                    after.st_ino,
                    stat.S_IFMT(after.st_mode),
                )
    finally:
        feeder.kill()
        feeder.wait()
        server.close()
    return {"calls": 8, "errors": errors, "hung": hung, "changed": changed}


def stale(work: Path) -> dict[str, int]:
    folder = work / "stale"
    folder.mkdir()
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # its pid is now free: a writer that died
    dead = folder / f".pi-{finished.pid}-{'0' * 12}.tmp"
    live = folder / f".pi-1-{'0' * 12}.tmp"  # pid 1 is always alive
    dead.write_text("half a file")
    live.write_text("being written")
    asyncio.run(call(folder, "write", {"path": "f.txt", "content": "x"}))
    return {"leaked": int(dead.exists()), "live_kept": int(live.exists())}


def metadata(work: Path) -> dict[str, int]:
    folder = work / "metadata"
    folder.mkdir()
    path = folder / "f.txt"
    path.write_text("old\n")
    path.chmod(0o640)
    as_root = os.geteuid() == 0
    if as_root:
        os.chown(path, 1234, 2345)
    xattrs = hasattr(os, "setxattr")
    if xattrs:
        try:
            os.setxattr(path, "user.origin", b"faults")
        except OSError:
            xattrs = False  # this filesystem has none
    before = path.stat()
    asyncio.run(call(folder, "write", {"path": "f.txt", "content": "new\n"}))
    asyncio.run(call(folder, "edit", {"path": "f.txt", "old_text": "new", "new_text": "newer"}))
    after = path.stat()
    changed = int(stat.S_IMODE(after.st_mode) != 0o640)
    if as_root:
        changed += (after.st_uid, after.st_gid) != (before.st_uid, before.st_gid)
    if xattrs:
        changed += os.getxattr(path, "user.origin") != b"faults"
    return {"owner_checked": int(as_root), "xattrs_checked": int(xattrs), "changed": changed}


def fuzz(work: Path, examples: int) -> dict[str, int]:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    folder = work / "fuzz"
    folder.mkdir()
    escaped: list[str] = []
    texts = st.one_of(st.text(max_size=50), st.just("\ud800"), st.just("x" * (1 << 20)))
    paths = st.one_of(
        st.text(min_size=1, max_size=40),
        st.just("a/" * 2500 + "f"),
        st.just("\udcff.txt"),
        st.just("nul\0.txt"),
        st.just("x" * 300),
    )
    fast = settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))

    def attempt(tool: str, arguments: dict[str, Any]) -> None:
        try:
            asyncio.run(call(folder, tool, arguments))
        except Exception as error:  # noqa: BLE001 (any escaping exception is the finding)
            escaped.append(f"{tool} {type(error).__name__}: {error!s:.80}")

    @fast
    @given(paths, texts)
    def writes(path: str, content: str) -> None:
        attempt("write", {"path": path, "content": content})

    @fast
    @given(paths, st.lists(st.tuples(texts, texts), min_size=1, max_size=3))
    def edits(path: str, pairs: list[tuple[str, str]]) -> None:
        (folder / "target.txt").write_text("hello world\n")
        batch = [{"old_text": old, "new_text": new} for old, new in pairs]
        attempt("edit", {"path": path, "edits": batch})
        attempt("edit", {"path": "target.txt", "edits": batch})

    writes()
    edits()
    for line in sorted(set(escaped))[:10]:
        print("escaped:", line, file=sys.stderr)
    return {"examples": 2 * examples, "escaped": len(escaped)}


if __name__ == "__main__":
    with contextlib.suppress(AttributeError):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
