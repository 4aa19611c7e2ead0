"""Lab 8.3 — write replaces a whole file atomically, one mutation per file at a time."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import contextvars
import errno
import fcntl
import functools
import gc
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import types
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import picourse
from lab_helpers import (
    OVER_TIME_LIMIT,
    assert_names_the_file_it_could_not_resolve,
    call,
    call_now,
    call_without_threads,
    descriptors_on,
    fifo_target,
    finished_within,
    opened_on_this_thread,
    raise_task_failures,
    resolving_fails_for,
    run,
    snapshot,
    socket_target,
    text_of,
    track_descriptors,
    utf8_len,
    watch_opens,
)
from picourse.coding_tools import (
    DEFAULT_MUTATION_QUEUE,
    MutationQueue,
    WriteDetails,
    create_coding_tools,
)
from picourse.tool import ToolOutput
from queue_probe import QueueProbe, hold_lane

pytestmark = pytest.mark.lab8_3


def only_expected_files(directory: Path, expected: set[str]) -> None:
    present = {p.name for p in directory.iterdir()}
    leftovers = present - expected
    assert not leftovers, f"no temp file may be left behind, found {sorted(leftovers)}"


# ---------------------------------------------------------------- the write tool


def test_write_creates_parents_and_reports_utf8_bytes(workspace: Path) -> None:
    out = call_now(create_coding_tools(workspace), "write", path="a/b/c.txt", content="héllo\n")
    target = workspace / "a" / "b" / "c.txt"
    assert not out.is_error, f"writing a new file must succeed, got: {text_of(out)}"
    assert target.read_text() == "héllo\n", "write must create missing parent directories"
    assert out.details == WriteDetails(str(target), 7), (
        "details.bytes counts UTF-8 bytes ('é' is 2), details.path is the joined path"
    )
    only_expected_files(target.parent, {"c.txt"})


def test_write_replaces_the_whole_file(workspace: Path) -> None:
    target = workspace / "f.txt"
    target.write_text("a much longer old content\n" * 10)
    call_now(create_coding_tools(workspace), "write", path="f.txt", content="short\n")
    assert target.read_text() == "short\n", "no byte of the old content may remain"
    only_expected_files(workspace, {"f.txt"})


def test_write_goes_through_a_temp_file_and_a_rename(workspace: Path) -> None:
    # A hard link is a second name for the same inode. Writing in place changes what both
    # names show; a temp file renamed over the target leaves the witness with the old bytes.
    target = workspace / "f.txt"
    target.write_text("old\n")
    os.link(target, workspace / "witness.txt")
    call_now(create_coding_tools(workspace), "write", path="f.txt", content="new\n")
    assert target.read_text() == "new\n"
    assert (workspace / "witness.txt").read_text() == "old\n", (
        "the file was written in place: write a temp file in the same directory and rename it"
    )
    only_expected_files(workspace, {"f.txt", "witness.txt"})


@pytest.mark.parametrize("mode", [0o755, 0o555], ids=["directory", "without-write-bits"])
def test_a_directory_target_fails_cleanly(workspace: Path, mode: int) -> None:
    (workspace / "d").mkdir()
    (workspace / "d" / "keep.txt").write_text("keep\n")
    (workspace / "d").chmod(mode)
    try:
        before = snapshot(workspace)
        out = call_now(create_coding_tools(workspace), "write", path="d", content="x")
        after = snapshot(workspace)
    finally:
        (workspace / "d").chmod(0o755)
    assert out.is_error and "directory" in text_of(out) and "read-only" not in text_of(out), (
        "writing to a directory must be an error result that says 'directory', whatever "
        f"its mode: look at what it is before whether it may be written. Got: {text_of(out)!r}"
    )
    assert after == before, "a failed write must change nothing, temp files included"


def test_a_parent_that_is_a_file_fails_cleanly(workspace: Path) -> None:
    (workspace / "plain").write_text("x\n")
    before = snapshot(workspace)
    out = call_now(create_coding_tools(workspace), "write", path="plain/child.txt", content="x")
    assert out.is_error, "a path below a regular file cannot be written: error result"
    assert snapshot(workspace) == before


def test_a_failing_rename_leaves_the_old_file_and_no_temp(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = workspace / "f.txt"
    target.write_text("old\n")

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    monkeypatch.setattr(os, "rename", broken)
    out = call_now(create_coding_tools(workspace), "write", path="f.txt", content="new\n")
    assert out.is_error, "an OSError while writing must become an error result"
    assert target.read_text() == "old\n", "a failed write must leave the old content"
    only_expected_files(workspace, {"f.txt"})


def test_write_refuses_to_leave_the_workspace_and_creates_nothing_outside(
    workspace: Path, outside: Path
) -> None:
    os.symlink(outside, workspace / "docs")
    before = snapshot(outside)
    registry = create_coding_tools(workspace)
    for path in (
        "../outside/secret.txt",
        "docs/secret.txt",
        "docs/new/created.txt",
        str(outside / "x.txt"),
    ):
        out = call_now(registry, "write", path=path, content="pwned\n")
        assert out.is_error and "escapes the workspace" in text_of(out), (
            f"write must use the workspace resolver and refuse {path!r}"
        )
    assert snapshot(outside) == before, "nothing outside the workspace may be changed or created"


def _written(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    return "a/b/c.txt", "héllo\n"  # 7 bytes in UTF-8


def _written_by_a_loose_name(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    return "./a//c.txt", "héllo\n"  # named as given, not as a/c.txt


def _directory(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    (workspace / "docs").mkdir()
    return "docs", "x\n"


def _special_file(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    os.mkfifo(workspace / "spool")
    return "spool", "x\n"


def _unencodable(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    (workspace / "notes.txt").write_text("old\n")
    return "notes.txt", "half a character: \ud800\n"  # a lone surrogate has no UTF-8


def _disk_full(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    (workspace / "notes.txt").write_text("old\n")

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", broken)
    monkeypatch.setattr(os, "rename", broken)
    return "notes.txt", "new\n"


def _temp_gone(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    # The rename fails after the temp file has vanished (another process cleaned it up):
    # the clean-up finds nothing to remove, and the result still gives the rename's reason.
    (workspace / "notes.txt").write_text("old\n")

    def vanished_then_failed(source: object, *args: object, **kwargs: object) -> None:
        os.unlink(str(source))
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(os, "replace", vanished_then_failed)
    monkeypatch.setattr(os, "rename", vanished_then_failed)
    return "notes.txt", "new\n"


WRITE_CASES: dict[str, Callable[[Path, pytest.MonkeyPatch], tuple[str, str]]] = {
    "written": _written,
    "written-by-a-loose-name": _written_by_a_loose_name,
    "directory": _directory,
    "special-file": _special_file,
    "unencodable-content": _unencodable,
    "disk-full": _disk_full,
    "rename-fails-temp-gone": _temp_gone,
}


def test_a_path_that_changes_while_it_is_resolved_is_an_error_result_naming_it(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "f.txt").write_text("old\n")
    resolving_fails_for(monkeypatch, "f.txt")  # swapped after the workspace check
    out = call_now(create_coding_tools(workspace), "write", path="f.txt", content="new\n")
    message = text_of(out)
    if not out.is_error:  # this write never asked os.path.realpath about f.txt
        assert (workspace / "f.txt").read_text() == "new\n", message
        return
    assert_names_the_file_it_could_not_resolve(out, "f.txt", workspace)
    assert (workspace / "f.txt").read_text() == "old\n", "a write that failed changes nothing"
    assert sorted(p.name for p in workspace.iterdir()) == ["f.txt"], "and leaves no temp file"


@pytest.mark.parametrize("case", list(WRITE_CASES))
def test_every_write_result_names_the_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    path, content = WRITE_CASES[case](workspace, monkeypatch)
    before = snapshot(workspace)
    out = call_now(create_coding_tools(workspace), "write", path=path, content=content)
    texts = [part.text for part in out.content]
    assert texts and all(isinstance(text, str) and text for text in texts), (
        f"invariant: every result is text the model can read; got {texts!r}"
    )
    message = text_of(out)
    assert path in message, (
        f"invariant: every result of write names the file as the model gave it ({path!r}), "
        "so the model knows which file it is about: name it in the success message, in "
        f"every refusal and in every OSError (describe_os_error(path, ...)). Got: {message!r}"
    )
    assert str(workspace) not in message, (
        f"invariant: the file is named as the model gave it ({path!r}), not as the absolute "
        f"path the tool made of it. Got: {message!r}"
    )
    if case.startswith("written"):
        assert not out.is_error, message
        assert re.search(rf"\b{utf8_len(content)}\b", message), (
            "invariant: a successful write says how many bytes it wrote (UTF-8 bytes), so "
            f"the model can check it; got {message!r}"
        )
        return
    assert out.is_error, f"{case}: expected an error result, got: {message!r}"
    if case == "disk-full":
        assert os.strerror(errno.ENOSPC) in message, (
            "an OSError while writing is an error result that gives the system's reason "
            f"(error.strerror): describe_os_error words it. Got: {message!r}"
        )
        assert re.search(r"\bwrite\b", message) and not re.search(r"\bedit\b", message), (
            "an OSError of write says that the write failed: describe_os_error(path, error, "
            f'action="write"), never another tool\'s action. Got: {message!r}'
        )
    if case == "rename-fails-temp-gone":
        assert os.strerror(errno.EXDEV) in message and "not found" not in message.lower(), (
            "when the clean-up finds the temp file already gone, the result still gives the "
            "failed rename's reason (ignore FileNotFoundError while removing the temp file, "
            f"then re-raise the original error). Got: {message!r}"
        )
    assert snapshot(workspace) == before, f"{case}: a refused write changes nothing"


# ---------------------------------------------------------------- durable and faithful


@dataclass
class RenameSpy:
    """Records what is fsynced and renamed, to prove the order of a durable replace."""

    # Inodes fsynced so far, with the size the kernel held for each then: data still in
    # Python's buffer (fsync before flush) is not there, and not made durable.
    synced: dict[int, int] = field(default_factory=dict)
    renames: list[tuple[str, str, bool]] = field(default_factory=list)  # src, dst, all synced?
    # In order: ("fsync", inode) and ("renamed into", inode of the destination's folder).
    events: list[tuple[str, int]] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> RenameSpy:
        for name in ("fsync", "fdatasync"):
            if hasattr(os, name):
                monkeypatch.setattr(os, name, self._sync(getattr(os, name)))
        for name in ("replace", "rename"):
            monkeypatch.setattr(os, name, self._rename(getattr(os, name)))
        return self

    def _sync(self, real: Callable[[int], None]) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            info = os.fstat(fd)
            self.synced[info.st_ino] = info.st_size
            self.events.append(("fsync", info.st_ino))
            real(fd)

        return sync

    def _rename(self, real: Callable[..., None]) -> Callable[..., None]:
        def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            info = os.stat(src, follow_symlinks=False)
            whole = self.synced.get(info.st_ino) == info.st_size
            self.renames.append((os.fspath(src), os.fspath(dst), whole))
            real(src, dst, *args, **kwargs)
            with contextlib.suppress(OSError):  # a name relative to a dir_fd: not followed
                folder = os.stat(os.path.dirname(os.fspath(dst))).st_ino
                self.events.append(("renamed into", folder))

        return rename


def test_a_short_write_is_continued_to_the_end(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.write may write fewer bytes than it is given (a signal, a quota, the 2 GiB cap of
    # one write on Linux) and returns how many: here at most 4 KiB a call.
    real_write = os.write

    def short_write(fd: int, data: Any) -> int:
        return real_write(fd, bytes(data)[:4096])

    monkeypatch.setattr(os, "write", short_write)
    content = "".join(f"line {n}\n" for n in range(20000))
    out = call_now(create_coding_tools(workspace), "write", path="big.txt", content=content)
    monkeypatch.undo()
    assert not out.is_error, text_of(out)
    assert (workspace / "big.txt").read_text() == content, (
        "os.write wrote only part of its bytes (it returns how many) and the rest was lost: "
        "write until every byte is written (a loop on os.write's count, or a file object's "
        f"write, which loops for you). The file holds {(workspace / 'big.txt').stat().st_size} "
        f"of {len(content)} bytes"
    )


@pytest.mark.parametrize("target", ["new", "replaced"])
def test_the_temp_file_is_fsynced_then_renamed_in_the_same_directory(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, target: str
) -> None:
    if target == "replaced":
        (workspace / "f.txt").write_text("old\n")
    # The system temp directory is often another filesystem (a tmpfs), where a rename to
    # the workspace fails with EXDEV; point it somewhere else to make the mistake visible.
    elsewhere = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else tmp_path / "elsewhere"
    elsewhere = Path(tempfile.mkdtemp(dir=elsewhere if elsewhere.is_dir() else tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    spy = RenameSpy().install(monkeypatch)
    try:
        out = call_now(create_coding_tools(workspace), "write", path="f.txt", content="new\n")
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    assert not out.is_error, text_of(out)
    assert (workspace / "f.txt").read_text() == "new\n"
    assert spy.renames, "write must rename a temp file over the target (os.replace)"
    src, dst, synced = spy.renames[-1]
    assert os.path.dirname(src) == os.path.dirname(dst), (
        "invariant: the temp file lies in the target's own directory (a rename is atomic "
        f"only within one filesystem); it was {src}"
    )
    assert synced, (
        "invariant: the temp file's data reaches the disk before the rename: flush, then "
        "os.fsync the temp file, then os.replace; otherwise a crash can leave an empty file "
        "(an fsync before the flush syncs nothing of what is still in Python's buffer)"
    )
    folder = ("renamed into", workspace.stat().st_ino)
    last = max((i for i, event in enumerate(spy.events) if event == folder), default=-1)
    assert ("fsync", folder[1]) in spy.events[last + 1 :], (
        "invariant: the rename itself reaches the disk: after os.replace, fsync the target's "
        "directory (os.open(folder, os.O_RDONLY | os.O_DIRECTORY), os.fsync, os.close), also "
        f"when a file is replaced (here: {target}): the rename changes which inode the name "
        "holds, or a crash may bring the old file back"
    )
    only_expected_files(workspace, {"f.txt"})


def test_every_write_uses_a_fresh_temp_name(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = RenameSpy().install(monkeypatch)
    registry = create_coding_tools(workspace)
    for content in ("one\n", "two\n", "three\n"):
        call_now(registry, "write", path="f.txt", content=content)
    names = [os.path.basename(src) for src, _, _ in spy.renames]
    assert len(names) == 3 and len(set(names)) == 3, (
        "invariant: two writers (threads or processes) never share a temp file: give each "
        f"temp file a new random name and create it with O_EXCL; got {names}"
    )


@contextlib.contextmanager
def umask_set_to(mask: int) -> Iterator[None]:
    """The process's umask is ``mask`` inside, and as it was again after."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077, 0o000])
def test_a_new_file_gets_the_usual_mode(workspace: Path, umask: int) -> None:
    with umask_set_to(umask):
        call_now(create_coding_tools(workspace), "write", path="fresh/new.txt", content="x\n")
    folder = stat.S_IMODE((workspace / "fresh").stat().st_mode)
    assert folder == 0o777 & ~umask, (
        f"a missing folder gets 0o777 & ~umask, as mkdir gives it; with umask {umask:03o} "
        f"expected {0o777 & ~umask:o}, got {folder:o}: os.makedirs(folder, exist_ok=True), "
        "with no mode of your own"
    )
    mode = stat.S_IMODE((workspace / "fresh" / "new.txt").stat().st_mode)
    assert mode == 0o666 & ~umask, (
        f"invariant: a new file gets 0o666 & ~umask, as the shell's > gives it; with umask "
        f"{umask:03o} expected {0o666 & ~umask:o}, got {mode:o}. Create the temp file with "
        "os.open(temp, O_WRONLY | O_CREAT | O_EXCL, 0o666), not tempfile.mkstemp (0o600)"
    )


@pytest.mark.parametrize("mode", [0o751, 0o666], ids=["executable", "shared-writable"])
def test_overwriting_keeps_the_permission_bits(workspace: Path, mode: int) -> None:
    target = workspace / "script.sh"
    target.write_text("echo old\n")
    target.chmod(mode)
    with umask_set_to(0o022):  # would take the group's and others' write bits off 0o666
        call_now(create_coding_tools(workspace), "write", path="script.sh", content="echo new\n")
    kept = stat.S_IMODE(target.stat().st_mode)
    assert kept == mode, (
        "invariant: replacing a file keeps its permission bits exactly (an executable must "
        "stay executable, a file others may write stays writable for them): give the temp "
        "file the old file's mode with os.fchmod before the rename; a mode given to os.open "
        f"passes through the umask. Expected {mode:o}, got {kept:o}"
    )


def test_overwriting_keeps_the_permission_bits_whoever_writes(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Students run these tests as a normal user, the course's CI as root. Run as root, this
    # test plays a normal user (the effective ids say 65534): the bits are kept either way.
    if os.geteuid() == 0:
        monkeypatch.setattr(os, "geteuid", lambda: 65534)
        monkeypatch.setattr(os, "getegid", lambda: 65534)
    target = workspace / "script.sh"
    target.write_text("echo old\n")
    target.chmod(0o751)
    call_now(create_coding_tools(workspace), "write", path="script.sh", content="echo new\n")
    kept = stat.S_IMODE(target.stat().st_mode)
    assert kept == 0o751, (
        "invariant: replacing a file keeps its permission bits whoever writes it, a normal "
        "user as much as root: os.fchmod the temp file to the old mode always; only the "
        f"owner is kept where allowed. Expected 751, got {kept:o}"
    )


def test_a_write_through_a_dangling_symlink_creates_its_target(workspace: Path) -> None:
    os.symlink("notes.txt", workspace / "link.txt")  # notes.txt does not exist yet
    out = call_now(create_coding_tools(workspace), "write", path="link.txt", content="new\n")
    assert not out.is_error, text_of(out)
    link, target = workspace / "link.txt", workspace / "notes.txt"
    assert link.is_symlink() and target.is_file() and target.read_text() == "new\n", (
        "invariant: a write through a symlink writes where it leads, also when the link is "
        "dangling: its target (inside the workspace) is created and the link stays a link. "
        "Replace the real path (os.path.realpath follows a dangling link as far as it "
        f"leads), never the link. Got: link {'kept' if link.is_symlink() else 'replaced'}, "
        f"notes.txt {'created' if target.exists() else 'missing'}"
    )


@dataclass
class TempSpy:
    """Watches the temp file: the flags it is created with (os.open with O_CREAT in the
    watched directory), and its permission bits at each point where it can be seen."""

    directory: Path
    created: list[tuple[str, int]] = field(default_factory=list)  # name, flags
    modes: list[tuple[str, int]] = field(default_factory=list)  # where, permission bits

    def install(self, monkeypatch: pytest.MonkeyPatch) -> TempSpy:
        real_open = os.open

        def spy_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            fd = real_open(path, flags, *args, **kwargs)
            where = Path(os.path.abspath(os.fspath(path)))
            if flags & os.O_CREAT and where.parent == self.directory:
                self.created.append((where.name, flags))
                self.modes.append(("created", stat.S_IMODE(os.fstat(fd).st_mode)))
            return fd

        monkeypatch.setattr(os, "open", spy_open)
        for name in ("fsync", "fdatasync"):
            if hasattr(os, name):
                monkeypatch.setattr(os, name, self._sync(getattr(os, name)))
        for name in ("replace", "rename"):
            monkeypatch.setattr(os, name, self._rename(getattr(os, name)))
        return self

    def _sync(self, real: Callable[[int], None]) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode):
                self.modes.append(("fsynced", stat.S_IMODE(info.st_mode)))
            real(fd)

        return sync

    def _rename(self, real: Callable[..., None]) -> Callable[..., None]:
        def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            self.modes.append(
                ("renamed", stat.S_IMODE(os.stat(src, follow_symlinks=False).st_mode))
            )
            real(src, dst, *args, **kwargs)

        return rename


def test_the_temp_file_is_created_exclusively(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "f.txt").write_text("old\n")
    spy = TempSpy(workspace.resolve()).install(monkeypatch)
    registry = create_coding_tools(workspace)
    call_now(registry, "write", path="f.txt", content="new\n")
    call_now(registry, "write", path="g.txt", content="new\n")
    shared = [name for name, flags in spy.created if not flags & os.O_EXCL]
    assert not shared, (
        "invariant: a temp file is created exclusively, so two writers never share one and "
        "nothing that already has its name is written through: os.open(temp, O_WRONLY | "
        f"O_CREAT | O_EXCL, 0o666). Created without O_EXCL: {shared}"
    )
    only_expected_files(workspace, {"f.txt", "g.txt"})


def test_the_temp_file_has_the_old_bits_before_the_rename(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = workspace / "script.sh"
    target.write_text("echo old\n")
    target.chmod(0o751)
    spy = TempSpy(workspace.resolve()).install(monkeypatch)
    out = call_now(create_coding_tools(workspace), "write", path="script.sh", content="echo new\n")
    assert not out.is_error, text_of(out)
    renamed = [mode for where, mode in spy.modes if where == "renamed"]
    assert renamed, "write must rename a temp file over the target (os.replace)"
    assert renamed[-1] == 0o751, (
        "invariant: the new file has the old file's permission bits from the moment it "
        "appears under the target's name: give the temp file the old mode (os.fchmod) "
        "before the rename, not the renamed file after it (readers would see the new file "
        f"with the temp file's mode meanwhile). At the rename it had {renamed[-1]:o}"
    )
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    only_expected_files(workspace, {"script.sh"})


def _fail_by_removing_the_temp(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
    os.unlink(src)  # someone removed the temp file before the rename
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), src)


def _fail_to_sync(fd: int) -> None:
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def _break_writes_to(fd: int) -> None:
    """Point ``fd`` at a pipe whose reading end is closed: every write fails (EPIPE),
    made with os.write or through a file object alike."""
    reading, writing = os.pipe()
    os.close(reading)
    os.dup2(writing, fd, inheritable=False)
    os.close(writing)


def break_data_writes(directory: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make writing the data of every file created in ``directory`` fail (as on a full
    disk), whether it was created with os.open or open() and is written with os.write or
    a file object's write. Returns the names of the files created so."""
    broken: list[str] = []

    def created_here(path: Any) -> bool:
        if not isinstance(path, str | bytes | os.PathLike):
            return False  # a descriptor: nothing is created
        return Path(os.path.abspath(os.fsdecode(path))).parent == directory

    real_os_open = os.open

    def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_os_open(path, flags, *args, **kwargs)
        if flags & os.O_CREAT and created_here(path):
            _break_writes_to(fd)
            broken.append(os.path.basename(os.fsdecode(path)))
        return fd

    def file_open(real: Callable[..., Any]) -> Callable[..., Any]:
        def open_file(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            file = real(path, mode, *args, **kwargs)
            if set(mode) & set("wxa") and created_here(path):
                _break_writes_to(file.fileno())
                broken.append(os.path.basename(os.fsdecode(path)))
            return file

        return open_file

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", file_open(builtins.open))
    monkeypatch.setattr(io, "open", file_open(io.open))
    return broken


def _temp_gone_before_rename(directory: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    for name in ("replace", "rename"):
        monkeypatch.setattr(os, name, _fail_by_removing_the_temp)
    return ["os.replace"]


def _fsync_fails(directory: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    for name in ("fsync", "fdatasync"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _fail_to_sync)
    return ["os.fsync"]


def _data_write_fails(directory: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return break_data_writes(directory.resolve(), monkeypatch)


MIDWAY_FAULTS: dict[str, Callable[[Path, pytest.MonkeyPatch], list[str]]] = {
    "temp-gone-before-rename": _temp_gone_before_rename,
    "fsync-fails": _fsync_fails,
    "data-write-fails": _data_write_fails,
}


@pytest.mark.parametrize("fault", list(MIDWAY_FAULTS))
def test_a_write_that_fails_midway_is_an_error_result(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    target = workspace / "f.txt"
    target.write_text("old\n")
    armed = MIDWAY_FAULTS[fault](workspace, monkeypatch)
    still_open = track_descriptors(monkeypatch, workspace)
    out = call_now(create_coding_tools(workspace), "write", path="f.txt", content="new\n")
    assert armed, (
        "the test makes writing the temp file's data fail through the descriptor of a file "
        "created in the target's directory, but write created none there: create the temp "
        "file with os.open(temp, O_WRONLY | O_CREAT | O_EXCL, 0o666) in the target's directory"
    )
    assert out.is_error, (
        "invariant: whatever fails while writing (also the cleanup of a temp file that is "
        "already gone) is an error result, never an exception: remove the temp file only if "
        f"it is still there. Got: {text_of(out)!r}"
    )
    assert target.read_text() == "old\n", "a failed write must leave the old content"
    left = sorted({p.name for p in workspace.iterdir()} - {"f.txt"})
    assert not left, (
        f"invariant: no temp file survives a failure ({fault}), also when writing its data "
        "fails (a full disk): everything after creating the temp file, the data write "
        f"included, belongs in the try whose except removes it. Left: {left}"
    )
    assert not still_open(), (
        f"invariant: a failed write ({fault}) closes what it opened: close the temp file's "
        f"descriptor in a finally, not only on success. Still open: {still_open()}"
    )


@pytest.mark.parametrize("fault", list(MIDWAY_FAULTS))
def test_a_failed_write_keeps_the_empty_folder_that_was_there(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    folder = workspace / "empty"
    folder.mkdir()
    MIDWAY_FAULTS[fault](folder, monkeypatch)
    out = call_now(create_coding_tools(workspace), "write", path="empty/new.txt", content="x\n")
    assert out.is_error, f"a write that fails midway ({fault}) is an error result: {text_of(out)!r}"
    assert snapshot(workspace) == {"empty": "<dir>"}, (
        "invariant: a failed write loses nothing and leaves no trace: its temp file goes, and "
        "the folder empty/, which was there before the write, stays though it is empty. "
        "Remove only folders the write itself created, never the target's folder as such"
    )


@pytest.mark.parametrize("folder_fsync", ["works", "fails"])
def test_a_write_leaves_no_descriptor_open_on_the_folder_or_the_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, folder_fsync: str
) -> None:
    if folder_fsync == "fails":  # a file system that cannot sync a folder (EIO)
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
    registry = create_coding_tools(workspace)
    for n in range(3):
        out = call_now(registry, "write", path="f.txt", content=f"version {n}\n")
        # Whether a failed folder fsync fails the write is the tool's choice; leaking is not.
        assert folder_fsync == "fails" or not out.is_error, text_of(out)
    left = {
        "the folder": descriptors_on(monkeypatch, workspace),
        "the file": descriptors_on(monkeypatch, workspace / "f.txt"),
    }
    assert not any(left.values()), (
        "invariant: a write closes every descriptor it opens, the folder's (opened for its "
        "fsync after the rename) and the temp file's, on every path (try/finally), also when "
        f"that fsync fails (folder fsync {folder_fsync}): one leaked per write ends an "
        f"agent's session at the process's limit. Still open: {left}"
    )


def test_write_does_its_file_work_in_a_worker_thread(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opens = watch_opens(monkeypatch)
    out = call_now(create_coding_tools(workspace), "write", path="f.txt", content="new\n")
    assert not out.is_error, text_of(out)
    assert any(Path(name).resolve().parent == workspace.resolve() for name, _ in opens), (
        "write must create its temp file by name in the target's folder (the test sees "
        "every open by name)"
    )
    on_the_loop = opened_on_this_thread(opens, workspace)
    assert not on_the_loop, (
        "invariant: write does its file work in a worker thread (threads.in_thread), never "
        "on the event loop's thread: the temp file's creation, data and fsync, the rename "
        "and the folder's fsync all block, and write_atomic waits for the folder's lock "
        "while a writer in another event loop or process holds it; meanwhile every other "
        f"task of the loop would stop. Opened on the loop's thread: {on_the_loop}"
    )


def test_write_still_writes_when_no_thread_can_be_started(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = call_without_threads(
        monkeypatch, create_coding_tools(workspace), "write", path="f.txt", content="new\n"
    )
    assert not out.is_error and (workspace / "f.txt").read_text() == "new\n", (
        "when no thread can be started, write still writes: run its file work through "
        f"threads.in_thread, which runs it right there then. Got: {text_of(out)!r}"
    )


def test_a_folder_that_another_writer_creates_meanwhile_is_used(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Writes of two files in one new folder run at once (different lanes): both see the
    # folder missing, both create it, one of them gets FileExistsError. Here every folder
    # appears just before this write's own mkdir.
    real_mkdir = os.mkdir
    raced: list[str] = []

    def mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if not os.path.isdir(path):
            real_mkdir(path, *args, **kwargs)  # the other writer was faster
            raced.append(os.path.basename(os.fspath(path)))
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)

    monkeypatch.setattr(os, "mkdir", mkdir)
    out = call_now(create_coding_tools(workspace), "write", path="new/deeper/f.txt", content="x")
    assert not out.is_error, (
        "invariant: a folder that another writer created meanwhile is fine: when mkdir says "
        "FileExistsError and the path is a directory now, go on (os.makedirs(path, "
        f"exist_ok=True) does). Got: {text_of(out)!r}"
    )
    assert (workspace / "new" / "deeper" / "f.txt").read_text() == "x"
    assert raced, "the test expected write to create the missing folders with os.mkdir"


@pytest.mark.parametrize(
    ("kind", "link", "mode"),
    [
        ("FIFO", None, None),
        ("FIFO", "link", None),
        ("FIFO", None, 0o444),
        ("socket", None, None),
        ("socket", "link", None),
    ],
    ids=["fifo", "symlink-to-fifo", "fifo-without-write-bits", "socket", "symlink-to-socket"],
)
def test_only_a_regular_file_is_replaced(
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    link: str | None,
    mode: int | None,
) -> None:
    if kind == "FIFO":
        special, name = fifo_target(workspace, link)
    else:
        special, name = socket_target(workspace, link, monkeypatch)
    if mode is not None:
        special.chmod(mode)
    out = call_now(create_coding_tools(workspace), "write", path=name, content="x\n")
    assert out.is_error and "regular file" in text_of(out) and "read-only" not in text_of(out), (
        f"invariant: write replaces only a regular file; a {kind}, like anything os.stat "
        "does not call stat.S_ISREG (a FIFO, a device, a socket), is an error result that "
        "says 'regular file', whatever its mode (look at what it is before whether it may "
        f"be written). os.stat the target before writing. Got: {text_of(out)!r}"
    )
    is_kind = stat.S_ISFIFO if kind == "FIFO" else stat.S_ISSOCK
    assert is_kind(os.lstat(special).st_mode), (
        f"the {kind} must still be there, unchanged: a refused write replaces nothing"
    )
    only_expected_files(workspace, {special.name, name})


# ---------------------------------------------------------------- the queue itself


async def gated(
    log: list[str], name: str, gate: asyncio.Event, started: asyncio.Event | None = None
) -> str:
    log.append(f"{name} start")
    if started is not None:
        started.set()
    await gate.wait()
    log.append(f"{name} end")
    return name


async def settle() -> None:
    """Let every task that is ready run (no threads involved): a few loop iterations."""
    for _ in range(20):
        await asyncio.sleep(0)


async def three_gated_operations_on_one_key() -> tuple[
    list[str], list[asyncio.Event], list[asyncio.Task[str]]
]:
    """op0, op1 and op2 queued in that order on one key, each held at its gate; returns
    once op0 has started."""
    queue = MutationQueue()
    log: list[str] = []
    gates = [asyncio.Event() for _ in range(3)]
    started = asyncio.Event()
    tasks = [
        asyncio.create_task(
            queue.run("k", functools.partial(gated, log, f"op{i}", gates[i], started))
        )
        for i in range(3)
    ]
    await wait_or_fail(started, tasks, "MutationQueue.run never started op0 on a free key")
    return log, gates, tasks


def test_the_same_key_runs_strictly_in_order() -> None:
    async def scenario() -> list[str]:
        log, gates, tasks = await three_gated_operations_on_one_key()
        await settle()
        raise_task_failures(*tasks)
        assert log == ["op0 start"], (
            "while op0 runs, later operations on the same key must wait, got " + repr(log)
        )
        gates[2].set()  # opening a later gate first must not let op2 overtake
        gates[1].set()
        await settle()
        assert log == ["op0 start"], "op1 and op2 must wait for op0 even when their gates are open"
        gates[0].set()
        assert await asyncio.gather(*tasks) == ["op0", "op1", "op2"], "run returns the result"
        return log

    assert run(scenario()) == [
        "op0 start",
        "op0 end",
        "op1 start",
        "op1 end",
        "op2 start",
        "op2 end",
    ], "operations on one key must run one after another, in the order they were queued"


def test_each_waiter_waits_for_the_one_queued_just_before_it() -> None:
    async def scenario() -> list[str]:
        log, gates, tasks = await three_gated_operations_on_one_key()
        gates[0].set()  # only op0 may end: op1 then runs, and op2 must still wait for it
        await settle()
        raise_task_failures(*tasks)
        seen = list(log)
        gates[1].set()
        gates[2].set()
        await asyncio.gather(*tasks)
        return seen

    assert run(scenario()) == ["op0 start", "op0 end", "op1 start"], (
        "when op0 ends, op1 starts and op2 keeps waiting for op1: every operation must become "
        "its key's tail (the completion the next one waits for) as soon as it is queued, "
        "before it waits, not after"
    )


async def wait_or_fail(event: asyncio.Event, tasks: list[asyncio.Task[Any]], message: str) -> None:
    waiting = asyncio.create_task(event.wait())
    await asyncio.wait({waiting, *tasks}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    raise_task_failures(*tasks)
    assert event.is_set(), message


def test_an_operation_queued_later_waits_for_the_one_running_now() -> None:
    async def scenario() -> list[str]:
        queue = MutationQueue()
        log: list[str] = []
        gates = [asyncio.Event() for _ in range(3)]
        started = [asyncio.Event() for _ in range(3)]
        first = asyncio.create_task(queue.run("k", lambda: gated(log, "op0", gates[0], started[0])))
        second = asyncio.create_task(
            queue.run("k", lambda: gated(log, "op1", gates[1], started[1]))
        )
        await wait_or_fail(started[0], [first, second], "op0 never started on a free key")
        gates[0].set()  # op0 ends and hands over to op1
        await wait_or_fail(started[1], [first, second], "op1 never started after op0 ended")
        third = asyncio.create_task(queue.run("k", lambda: gated(log, "op2", gates[2], started[2])))
        gates[2].set()
        await settle()
        raise_task_failures(first, second, third)
        assert "op2 start" not in log, (
            "invariant: an operation queued while another runs waits for it, also after "
            "earlier ones finished. When an operation ends, forget the key's tail only if it "
            f"is still this operation's own (a later one may have replaced it). Got {log!r}"
        )
        gates[1].set()
        await asyncio.gather(first, second, third)
        return log

    assert run(scenario()) == [
        "op0 start",
        "op0 end",
        "op1 start",
        "op1 end",
        "op2 start",
        "op2 end",
    ]


@pytest.mark.parametrize("next_caller", ["queued-before", "queued-after"])
def test_a_caller_cancelled_in_the_queue_does_not_let_the_next_one_overtake(
    next_caller: str,
) -> None:
    async def scenario() -> list[str]:
        queue = MutationQueue()
        log: list[str] = []
        gate, started, never = asyncio.Event(), asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(queue.run("k", lambda: gated(log, "op0", gate, started)))
        await wait_or_fail(started, [first], "MutationQueue.run never started op0 on a free key")
        waiting = asyncio.create_task(queue.run("k", lambda: gated(log, "op1", never)))

        def queue_op2() -> asyncio.Task[str]:
            return asyncio.create_task(queue.run("k", lambda: gated(log, "op2", gate)))

        last = queue_op2() if next_caller == "queued-before" else None
        await settle()
        waiting.cancel()  # op1 gives up while op0 still runs
        await settle()
        if last is None:  # op1 was the last in the lane when it gave up
            last = queue_op2()
            await settle()
        raise_task_failures(first, last)
        assert log == ["op0 start"], (
            "invariant: a caller cancelled while it waits must not open the lane for the "
            "next one while the operation ahead still runs, whether that one was queued "
            f"before the cancel or after it ({next_caller}): hand over only when the "
            "operation ahead is done, and do not forget the key's tail before then. Got "
            f"{log!r}"
        )
        gate.set()
        await asyncio.gather(first, last)
        assert waiting.cancelled(), "the cancelled caller must see CancelledError"
        return log

    assert run(scenario()) == ["op0 start", "op0 end", "op2 start", "op2 end"], (
        "the cancelled operation must never run; the others run in order"
    )


def test_a_cancelled_caller_keeps_the_lane_until_its_thread_ends() -> None:
    entered, release = threading.Event(), threading.Event()
    log: list[str] = []

    def slow_write() -> None:
        entered.set()
        release.wait(10)
        log.append("op0 thread end")

    async def next_operation() -> None:
        log.append("op1 start")

    async def scenario() -> None:
        queue = MutationQueue()
        first = asyncio.create_task(queue.run("k", lambda: asyncio.to_thread(slow_write)))
        try:
            thread_started = asyncio.create_task(asyncio.to_thread(entered.wait, 5))
            await asyncio.wait({first, thread_started}, return_when=asyncio.FIRST_COMPLETED)
            raise_task_failures(first)
            assert await thread_started, "op0's thread never started"
            second = asyncio.create_task(queue.run("k", next_operation))
            await settle()
            first.cancel()  # the caller gives up while the worker thread still writes
            with contextlib.suppress(asyncio.CancelledError):
                await first
            assert first.cancelled(), (
                "invariant: a caller cancelled while its operation runs gets CancelledError "
                "(let the CancelledError of awaiting asyncio.shield(task) propagate; never "
                f"turn it into a result): run returned {first.result()!r} instead"
            )
            await settle()
            assert log == [], (
                "invariant: the lane belongs to an operation until it really ends. A worker "
                "thread cannot be cancelled: when the caller is cancelled, keep the operation "
                "running (asyncio.shield) and hand over only once it is done. Got "
                f"{log!r} while op0's thread was still running"
            )
        finally:
            entered.set()  # also ends the waiting thread when op0 never started
            release.set()
        await second
        assert log == ["op0 thread end", "op1 start"]

    run(scenario())


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("a", "b"),
        ("/ws/notes.txt", "/ws/todo.txt"),
        ("/ws/f.txt", "/ws/f.txt.bak"),
        ("x", "./x"),
        ("/ws/f.txt", "/ws//f.txt"),
    ],
    ids=[
        "two-keys",
        "two-files-of-one-folder",
        "a-name-and-a-longer-one",
        "a-name-and-its-dot-spelling",
        "a-path-and-its-double-slash-spelling",
    ],
)
def test_different_keys_run_concurrently(first: str, second: str) -> None:
    async def scenario() -> None:
        queue = MutationQueue()
        log: list[str] = []
        held = asyncio.Event()  # never opened until b is done
        a = asyncio.create_task(queue.run(first, lambda: gated(log, "a", held)))
        await asyncio.sleep(0)
        raise_task_failures(a)
        failure = (
            f"an operation on key {second!r} must not wait for key {first!r}: a lane per key "
            "as given, never per folder or prefix, and never a key the queue spells otherwise "
            "itself (write and edit pass canonical_key; it did not end within 5 s)"
        )
        assert await finished_within(queue.run(second, lambda: _done(log)), 5, failure) == "b"
        assert log == ["a start", "b ran"], "b must run while a is still running"
        held.set()
        await a

    run(scenario())


async def _done(log: list[str]) -> str:
    log.append("b ran")
    return "b"


def test_a_failed_operation_releases_the_next_one() -> None:
    async def scenario() -> None:
        queue = MutationQueue()
        gate = asyncio.Event()

        async def failing() -> None:
            await gate.wait()
            raise OSError("disk full")

        first = asyncio.create_task(queue.run("k", failing))
        second = asyncio.create_task(queue.run("k", lambda: _done([])))
        await asyncio.sleep(0)
        raise_task_failures(first, second)
        gate.set()
        with pytest.raises(OSError, match="disk full"):
            await first  # the failure reaches the caller of run
        failure = "a failed operation must still release the next one (it did not run within 5 s)"
        assert await finished_within(second, 5, failure) == "b"

    run(scenario())


# Walking from the queue must not escape into the rest of the process: classes and modules
# reach everything, a frame reaches its caller's locals, a loop reaches every task.
_OPAQUE = (
    type,
    types.ModuleType,
    types.FrameType,
    types.CodeType,
    asyncio.AbstractEventLoop,
    contextvars.Context,
)


def reachable_from(root: object, limit: int = 200_000) -> list[object]:
    """What ``root`` keeps alive through its attributes, containers, futures, callbacks
    and closures (a function's globals are not followed)."""
    seen, found, todo = {id(root)}, [], [root]
    while todo and len(seen) < limit:
        current = todo.pop()
        if isinstance(current, types.FunctionType):
            referents = [*(current.__closure__ or ()), *(current.__defaults__ or ())]
        elif isinstance(current, dict):  # the collector does not list a dict's str keys
            referents = [*dict.keys(current), *dict.values(current)]
        else:
            referents = gc.get_referents(current)
        for item in referents:
            if id(item) not in seen and not isinstance(item, _OPAQUE):
                seen.add(id(item))
                found.append(item)
                todo.append(item)
    return found


async def _ok() -> None:
    return None


async def _fail() -> None:
    raise OSError("disk full")


def test_the_queue_forgets_a_file_once_nothing_waits_for_it() -> None:
    async def scenario() -> None:
        queue = MutationQueue()
        keys = [f"/forget-probe/{uuid.uuid4().hex}/{n}.txt" for n in range(50)]
        for key in keys[0:10]:  # one operation
            await queue.run(key, _ok)
        for key in keys[10:20]:  # one that fails
            with pytest.raises(OSError, match="disk full"):
                await queue.run(key, _fail)
        # three at once in one lane
        await asyncio.gather(*(queue.run(key, _ok) for key in keys[20:30] for _ in range(3)))
        for key in keys[30:40]:  # a caller cancelled while waiting, one while running
            log: list[str] = []
            gate, started = asyncio.Event(), asyncio.Event()
            operation = functools.partial(gated, log, "op", gate, started)
            running = asyncio.create_task(queue.run(key, operation))
            await wait_or_fail(started, [running], "MutationQueue.run never started an operation")
            waiting = asyncio.create_task(queue.run(key, _ok))
            await settle()
            waiting.cancel()
            running.cancel()  # its operation goes on until the gate opens
            await settle()
            gate.set()
            await queue.run(key, _ok)  # runs once the gated operation has ended
        for key in keys[40:50]:  # the last caller cancelled while waiting: nobody comes after
            gate, started = asyncio.Event(), asyncio.Event()
            operation = functools.partial(gated, [], "op", gate, started)
            running = asyncio.create_task(queue.run(key, operation))
            await wait_or_fail(started, [running], "MutationQueue.run never started an operation")
            waiting = asyncio.create_task(queue.run(key, _ok))
            await settle()
            waiting.cancel()
            await settle()
            gate.set()
            await running
        await settle()
        left = set(keys)
        reachable = reachable_from(queue)
        kept = [item for item in reachable if isinstance(item, str) and item in left]
        pending = [
            item
            for item in reachable
            if isinstance(item, asyncio.Future | asyncio.Lock | asyncio.Event | asyncio.Condition)
        ]
        assert not kept and len(pending) < 5, (
            "invariant: the queue forgets a file once no operation runs or waits for it; a "
            "long session touches many files and must not keep every one of them: when an "
            "operation ends and the key's tail is still its own, delete the key (also for a "
            "caller cancelled while waiting, once the one ahead of it ends). After 50 "
            f"files were done, the queue still keeps {len(kept)} of their keys and "
            f"{len(pending)} futures or locks"
        )

    run(scenario())


async def _abandoned(gate: asyncio.Event, started: asyncio.Event, ending: str) -> None:
    started.set()
    await gate.wait()
    if ending == "fails":
        raise OSError("disk full")
    raise asyncio.CancelledError


@pytest.mark.challenge
def test_an_operation_whose_caller_gave_up_is_not_reported_as_lost() -> None:
    # asyncio reports a task whose exception nobody retrieved ("Task exception was never
    # retrieved") when it is collected, and an exception raised in a done callback
    # ("Exception in callback"). A caller cancelled while its operation runs no longer
    # awaits it: asyncio.shield removes its own callback from the inner task then.
    reports: list[str] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: reports.append(context["message"]))
        queue = MutationQueue()
        for ending in ("fails", "is cancelled"):
            gate, started = asyncio.Event(), asyncio.Event()

            operation = functools.partial(_abandoned, gate, started, ending)
            caller = asyncio.create_task(queue.run("k", operation))
            await wait_or_fail(started, [caller], "MutationQueue.run never started an operation")
            caller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await caller
            gate.set()
            await queue.run("k", _ok)  # runs once the abandoned operation has ended
            del caller
        await settle()
        gc.collect()  # the abandoned operations' tasks go now
        await settle()
        loop.set_exception_handler(None)

    run(scenario())
    assert not reports, (
        "invariant: an operation whose caller gave up still ends quietly: its failure was "
        "handled by nobody, so retrieve it yourself (a done callback on the operation's task "
        "that calls task.exception() unless task.cancelled()). asyncio reported: "
        f"{reports}"
    )


# ---------------------------------------------------------------- tools and the one queue


def test_write_uses_the_default_queue_keyed_by_the_canonical_path(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = QueueProbe().install(monkeypatch)
    (workspace / "real").mkdir()
    os.symlink(workspace / "real", workspace / "alias")
    call_now(create_coding_tools(workspace), "write", path="alias/f.txt", content="x")
    call_now(create_coding_tools(workspace), "write", path="real/f.txt", content="y")
    assert len(probe.calls) == 2, "every write must run inside MutationQueue.run"
    queues = {id(queue) for queue, _ in probe.calls}
    assert queues == {id(DEFAULT_MUTATION_QUEUE)}, (
        "all registries must share DEFAULT_MUTATION_QUEUE, not a queue per call or per registry"
    )
    keys = {key for _, key in probe.calls}
    assert keys == {os.path.realpath(workspace / "real" / "f.txt")}, (
        "the key must be the canonical path (symlinks resolved): two names, one lane"
    )


def test_a_failing_write_still_runs_inside_the_queue(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = QueueProbe().install(monkeypatch)
    (workspace / "d").mkdir()
    out = call_now(create_coding_tools(workspace), "write", path="d", content="x")
    assert out.is_error
    assert probe.started, "a write that passed path resolution must run inside the queue"


def test_write_waits_for_an_operation_holding_its_lane(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = QueueProbe().install(monkeypatch)
    target = workspace / "f.txt"
    target.write_text("old\n")

    async def scenario() -> None:
        gate = asyncio.Event()
        seen_by_holder: list[str] = []

        async def holder() -> None:
            await gate.wait()
            seen_by_holder.append(target.read_text())

        key = os.path.realpath(target)
        holding = await hold_lane(DEFAULT_MUTATION_QUEUE, key, holder)
        entered = probe.arm()
        writing = asyncio.create_task(
            call(create_coding_tools(workspace), "write", {"path": "f.txt", "content": "new\n"})
        )
        await entered_within(entered, 5)
        assert key not in probe.started, (
            "the write started while another operation held its file's lane"
        )
        gate.set()
        await holding
        await writing
        assert seen_by_holder == ["old\n"], "the write must not land before the lane is free"
        assert target.read_text() == "new\n"

    run(scenario())


async def _write_then_release(
    workspace: Path, content: str, reached: asyncio.Event, release: threading.Event
) -> ToolOutput:
    """Write shared.txt while another loop holds it; once the write reaches `reached` (or
    ends, or 5 s pass), let the other loop's holder go on, then await the write."""
    arguments = {"path": "shared.txt", "content": content}
    writing = asyncio.create_task(call(create_coding_tools(workspace), "write", arguments))
    waiting = asyncio.create_task(reached.wait())
    await asyncio.wait({writing, waiting}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    release.set()
    return await writing


@pytest.mark.challenge
def test_a_lane_held_in_another_event_loop_neither_breaks_nor_blocks_a_write(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two agents in one process, each with its own event loop in its own thread. A future
    # belongs to the loop that made it: awaiting another loop's future raises RuntimeError.
    # The queue keeps its lanes per event loop (files.directory_lock orders writers across
    # loops); a write here must not trip over a lane the other loop holds on the same file.
    target = workspace / "shared.txt"
    target.write_text("old\n")
    key = os.path.realpath(target)
    holding, release = threading.Event(), threading.Event()
    other_failures: list[BaseException] = []

    def other_agent() -> None:
        async def hold() -> None:
            async def holder() -> None:
                holding.set()
                await asyncio.to_thread(release.wait, 30)

            await DEFAULT_MUTATION_QUEUE.run(key, holder)

        try:
            run(hold(), timeout=60)
        except BaseException as error:  # noqa: BLE001 (reported in the test thread)
            other_failures.append(error)
            holding.set()

    thread = threading.Thread(target=other_agent)
    thread.start()
    try:
        assert holding.wait(10), "MutationQueue.run never started an operation on a free key"
        if other_failures:
            raise other_failures[0]  # an unfinished stage shows as itself
        probe = QueueProbe().install(monkeypatch)

        async def write_here() -> ToolOutput:
            # A queue that also orders across loops may go on once the release is set.
            return await _write_then_release(workspace, "new\n", probe.arm(), release)

        try:
            out = run(write_here())
        except RuntimeError as error:
            raise AssertionError(
                "invariant: no exception escapes a tool. A write in one event loop raised "
                f"{error!r} because another loop held its file's lane: keep the queue's tails "
                "per event loop (a future belongs to one loop), e.g. a dict per "
                "asyncio.get_running_loop()"
            ) from None
    finally:
        release.set()
        thread.join(30)
    assert not other_failures, f"the other loop's operation failed: {other_failures[0]!r}"
    assert not out.is_error and target.read_text() == "new\n", (
        f"the write must succeed, got: {text_of(out)!r}"
    )


@pytest.mark.challenge
def test_a_lane_is_kept_while_another_event_loop_uses_the_queue() -> None:
    # Two agents in one process, each with its own event loop: while this loop's operation
    # runs, the other loop uses the same queue. Forgetting this loop's lanes then (one set of
    # tails for whichever loop came last) lets its next operation on the file overtake.
    queue = MutationQueue()

    async def scenario() -> list[str]:
        log: list[str] = []
        gate, started = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(queue.run("k", lambda: gated(log, "op0", gate, started)))
        await wait_or_fail(started, [first], "MutationQueue.run never started op0 on a free key")
        await asyncio.to_thread(lambda: run(queue.run("k", _ok), timeout=30))
        second = asyncio.create_task(queue.run("k", lambda: _done(log)))
        await settle()
        overtook = "b ran" in log
        gate.set()
        await asyncio.gather(first, second)
        assert not overtook, (
            "invariant: an operation queued on a file waits for the one running on it in the "
            "same event loop, also after another loop used the queue meanwhile: keep the "
            "tails of every loop (a dict per asyncio.get_running_loop()), never only the "
            "last loop's"
        )
        return log

    assert run(scenario()) == ["op0 start", "op0 end", "b ran"]


@pytest.mark.challenge
def test_a_write_waits_for_a_writer_in_another_event_loop_to_rename(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An edit in another event loop (or process) holds files.directory_lock from its read to
    # its rename: a write that lands in between is overwritten by a copy made from the old
    # content, and lost, though both report success. The queue orders one loop only. Here
    # the other loop's writer is a write parked at its rename (temp file written, inside
    # whatever lock it holds); the write here must land after it, never before.
    target = workspace / "shared.txt"
    target.write_text("old\n")
    parked, release = threading.Event(), threading.Event()
    parked_in: list[int] = []  # the thread of the parked rename
    on_lock_attempt: list[Callable[[], object]] = []
    other: list[ToolOutput | BaseException] = []

    def parking(real: Callable[..., None]) -> Callable[..., None]:
        def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            if not parked_in and os.path.basename(os.fspath(dst)) == "shared.txt":
                parked_in.append(threading.get_ident())
                parked.set()
                release.wait(30)
            real(src, dst, *args, **kwargs)

        return rename

    for name in ("replace", "rename"):
        monkeypatch.setattr(os, name, parking(getattr(os, name)))
    real_flock = fcntl.flock

    def flock(fd: Any, operation: int) -> None:
        if parked_in and threading.get_ident() != parked_in[0]:
            for notify in on_lock_attempt:
                notify()
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)

    def other_agent() -> None:
        arguments = {"path": "shared.txt", "content": "from the other loop\n"}
        try:
            other.append(run(call(create_coding_tools(workspace), "write", arguments), 60))
        except BaseException as error:  # noqa: BLE001 (reported in the test thread)
            other.append(error)
        parked.set()  # it ended without reaching its rename

    async def write_here() -> ToolOutput:
        loop = asyncio.get_running_loop()
        at_lock = asyncio.Event()
        on_lock_attempt.append(lambda: loop.call_soon_threadsafe(at_lock.set))
        # Decided by events: the write here ends, or it tries the directory's flock. A lock
        # of another kind is not seen; then the 5 s only let it try first, and a write that
        # waits for the parked one passes whenever that is released.
        try:
            return await _write_then_release(workspace, "from this loop\n", at_lock, release)
        finally:
            on_lock_attempt.clear()

    thread = threading.Thread(target=other_agent)
    thread.start()
    try:
        if not parked.wait(15):
            raise AssertionError(
                f"{OVER_TIME_LIMIT}the other loop's write neither renamed its temp file nor "
                "ended within 15 s"
            )
        if other and isinstance(other[0], BaseException):
            raise other[0]  # an unfinished stage shows as itself
        assert parked_in, (
            "the other loop's write ended without renaming its temp file over shared.txt: "
            "write the temp file, then os.replace it over the target"
        )
        out = run(write_here())
    finally:
        release.set()
        thread.join(30)
    assert other and not isinstance(other[0], BaseException), f"the other loop's write: {other}"
    assert not other[0].is_error, f"the other loop's write must succeed: {text_of(other[0])}"
    assert not out.is_error, f"the write must succeed, got: {text_of(out)!r}"
    assert target.read_text() == "from this loop\n", (
        "no lost update between two event loops: a write started while a writer in another "
        "loop held the directory (its temp file written, its rename to come) and landed "
        "first, so that writer's rename then replaced it, and it was lost though it "
        "reported success (an edit's rename would bring back a copy of the old content). "
        "Take files.directory_lock(directory) in write_atomic around the temp file and the "
        f"rename. The file holds: {target.read_text()!r}"
    )


@pytest.mark.challenge
def test_two_names_of_one_file_share_one_lane(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = QueueProbe().install(monkeypatch)
    target = workspace / "f.txt"
    target.write_text("old\n")
    os.symlink(target, workspace / "link.txt")

    async def scenario() -> None:
        gate = asyncio.Event()
        key = os.path.realpath(target)
        holding = await hold_lane(DEFAULT_MUTATION_QUEUE, key, gate.wait)
        entered = probe.arm()
        through_link = asyncio.create_task(
            call(
                create_coding_tools(workspace), "write", {"path": "link.txt", "content": "second\n"}
            )
        )
        await entered_within(entered, 5)
        assert not probe.started, "a write through a symlink must wait in its target's lane"
        gate.set()
        await holding
        await through_link
        assert target.read_text() == "second\n", "writing through a symlink changes its target"
        assert os.path.islink(workspace / "link.txt"), "the symlink itself must stay a symlink"

    run(scenario())


@pytest.mark.challenge
def test_a_name_of_255_bytes_can_be_written(workspace: Path) -> None:
    name = "é" * 125 + ".txt"  # 254 bytes, near the usual NAME_MAX of 255
    assert len(name.encode()) <= 255
    out = call_now(create_coding_tools(workspace), "write", path=name, content="x\n")
    assert not out.is_error, (
        f"a legal file name must be writable; keep the temp name short: {text_of(out)}"
    )
    only_expected_files(workspace, {name})


@pytest.mark.challenge
@pytest.mark.parametrize("step", ["rename", "mkdir"], ids=["rename-fails", "mkdir-fails"])
@pytest.mark.parametrize(
    "other",
    ["none", "file", "folder"],
    ids=["alone", "folder-used-meanwhile", "folder-made-meanwhile"],
)
def test_a_failed_write_removes_the_directories_it_created(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, step: str, other: str
) -> None:
    # Another writer may put a file in kept/new meanwhile ("file"), or create kept/new
    # itself just before this write's mkdir of it ("folder"): either way kept/new is not
    # this write's to remove.
    (workspace / "kept").mkdir()
    used = workspace / "kept" / "new" / "other.txt"  # another writer's file
    real_mkdir = os.mkdir

    def mkdir_after_another_writer(path: Any, *args: Any, **kwargs: Any) -> None:
        if os.path.basename(os.fspath(path)) == "new" and not os.path.isdir(path):
            real_mkdir(path, *args, **kwargs)
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
        real_mkdir(path, *args, **kwargs)

    if other == "folder":
        monkeypatch.setattr(os, "mkdir", mkdir_after_another_writer)

    def broken(real: Callable[..., None]) -> Callable[..., None]:
        def fail(path: Any, *args: Any, **kwargs: Any) -> None:
            if step == "mkdir" and os.path.basename(os.fspath(path)) != "deeper":
                real(path, *args, **kwargs)  # kept/new is made; kept/new/deeper fails
                return
            if other == "file":
                used.write_text("keep me\n")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        return fail

    for name in ("replace", "rename") if step == "rename" else ("mkdir",):
        monkeypatch.setattr(os, name, broken(getattr(os, name)))
    out = call_now(
        create_coding_tools(workspace), "write", path="kept/new/deeper/f.txt", content="x"
    )
    assert out.is_error, "a write that fails midway is an error result"
    expected: dict[str, bytes | str] = {"kept": "<dir>"}
    if other == "file":
        expected.update({"kept/new": "<dir>", "kept/new/other.txt": b"keep me\n"})
    elif other == "folder":
        expected["kept/new"] = "<dir>"
    assert snapshot(workspace) == expected, (
        "a failed write leaves no trace: remove the directories it created (and only those), "
        "deepest first, each only while it is empty: another writer may have put a file in "
        "one meanwhile (os.rmdir fails then: leave that folder and go on), or created one "
        "itself just before this write's mkdir of it (FileExistsError: not this write's "
        "folder, never remove it)"
    )


@pytest.mark.challenge
def test_a_file_the_shell_could_write_is_not_read_only(workspace: Path) -> None:
    # For root any write bit will do (the shell's > writes 0o464 as root); a normal user
    # needs its own write bit, given here.
    mode = 0o464 if os.geteuid() == 0 else 0o664
    target = workspace / "shared.txt"
    target.write_text("old\n")
    target.chmod(mode)
    out = call_now(create_coding_tools(workspace), "write", path="shared.txt", content="new\n")
    assert not out.is_error and target.read_text() == "new\n", (
        f"a file of mode {mode:o} is writable for this writer (the shell's > would write it): "
        "read-only means no write bit at all, or os.access(path, os.W_OK) false, not a "
        f"missing owner write bit. Got: {text_of(out)!r}"
    )


@pytest.mark.challenge
@pytest.mark.parametrize("mode", [0o444, 0o555, 0o400], ids=["444", "555", "400"])
def test_a_read_only_file_is_refused(workspace: Path, mode: int) -> None:
    target = workspace / "locked.txt"
    target.write_text("keep\n")
    target.chmod(mode)
    out = call_now(create_coding_tools(workspace), "write", path="locked.txt", content="x\n")
    assert out.is_error and "read-only" in text_of(out), (
        "a file without write permission is refused with 'read-only', as the shell's > "
        "refuses it (a rename would replace it silently); a file without any write bit "
        f"(here {mode:o}) is read-only for root too"
    )
    assert target.read_text() == "keep\n"
    only_expected_files(workspace, {"locked.txt"})


@pytest.mark.challenge
def test_a_path_too_long_once_its_symlinks_are_resolved_is_refused(workspace: Path) -> None:
    # The path as given is short; the real path behind the symlink is longer than the
    # system takes (PATH_MAX), so no system call can use it.
    try:
        path_max = os.pathconf(workspace, "PC_PATH_MAX")
    except (OSError, ValueError):
        path_max = 4096
    deep = str(workspace) + "/d" * ((path_max - 100 - len(str(workspace))) // 2)
    os.symlink(deep, workspace / "deep")
    name = "n" * 200
    out = call_now(create_coding_tools(workspace), "write", path=f"deep/{name}", content="x")
    assert out.is_error and "too long" in text_of(out).lower(), (
        "invariant: a path that is too long once its symlinks are resolved is an error result "
        "that says so ('File name too long' is the system's word for ENAMETOOLONG). Got: "
        f"{text_of(out)[:300]!r}"
    )
    assert snapshot(workspace) == {"deep": f"-> {deep}"}, (
        "a refused write creates nothing: no folder of the too-long path may be left behind"
    )


@pytest.mark.challenge
def test_the_temp_file_of_a_private_file_is_never_readable_by_others(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file descriptor keeps the rights it was opened with: another user who opens the
    # temp file while it is 0o644 can read the new content later, after any chmod.
    target = workspace / "secret.env"
    target.write_text("TOKEN=old\n")
    target.chmod(0o600)
    spy = TempSpy(workspace.resolve()).install(monkeypatch)
    with umask_set_to(0o022):
        out = call_now(
            create_coding_tools(workspace), "write", path="secret.env", content="TOKEN=new\n"
        )
    assert not out.is_error, text_of(out)
    wider = [(where, f"{mode:o}") for where, mode in spy.modes if mode & ~0o600]
    assert spy.modes and not wider, (
        "invariant: the temp file that replaces a private file (0o600) is never readable by "
        "others, not even for a moment: create it 0o600 when the target exists, then give it "
        f"the old file's bits (os.fchmod). Seen: {wider}"
    )
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    only_expected_files(workspace, {"secret.env"})


NOBODY = 65534  # the conventional uid and gid of nobody


def another_group() -> int:
    """A group the writer may give a file to other than its own: any group for root, else
    one of its supplementary groups (its own if it has none)."""
    if os.geteuid() == 0:
        return NOBODY
    return next((group for group in os.getgroups() if group != os.getegid()), os.getegid())


@pytest.mark.challenge
@pytest.mark.parametrize("owned_by", ["another-user", "the-writer-another-group"])
@pytest.mark.parametrize("may_chown", [True, False], ids=["as-root", "chown-refused"])
def test_a_replaced_file_keeps_its_owner_where_allowed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, may_chown: bool, owned_by: str
) -> None:
    # Only root can give a file to another user: a normal user checks that its own file
    # stays its own, and that a refused chown does not fail the write. A file of the
    # writer's own user may still belong to another group, which must stay too.
    if owned_by == "another-user":
        owner = (NOBODY, NOBODY) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    else:
        owner = (os.geteuid(), another_group())
    target = workspace / "shared.txt"
    target.write_text("old\n")
    os.chown(target, *owner)
    target.chmod(0o664)
    if not may_chown:
        # A normal user may replace another user's group-writable file but not give the
        # new one back to its owner: that is no reason to fail the write.
        def refuse(*args: object, **kwargs: object) -> None:
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))

        for name in ("chown", "fchown", "lchown"):
            monkeypatch.setattr(os, name, refuse)
    out = call_now(create_coding_tools(workspace), "write", path="shared.txt", content="new\n")
    assert not out.is_error, (
        "invariant: a write does not fail because the owner cannot be kept; keep it where "
        f"allowed (os.fchown in a try) and write anyway. Got: {text_of(out)!r}"
    )
    assert target.read_text() == "new\n"
    info = target.stat()
    assert stat.S_IMODE(info.st_mode) == 0o664, "the permission bits are kept in any case"
    if may_chown:
        assert (info.st_uid, info.st_gid) == owner, (
            "invariant: a replaced file keeps its owner and group where allowed (the temp "
            "file is the writer's, user and group: os.fchown it to the old owner and group "
            "whenever either differs, before the rename, then os.fchmod, as chown clears "
            f"set-id bits). Expected {owner}, got {(info.st_uid, info.st_gid)}"
        )
    only_expected_files(workspace, {"shared.txt"})


@pytest.mark.challenge
def test_a_replaced_set_id_file_keeps_its_owner_and_its_set_id_bits(workspace: Path) -> None:
    # chown clears the set-user-ID and set-group-ID bits, also when root calls it: the
    # bits given before the chown are gone after it.
    owner = (NOBODY, NOBODY) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    target = workspace / "tool.sh"
    target.write_text("#!/bin/sh\necho old\n")
    os.chown(target, *owner)
    target.chmod(0o6775)
    mode = stat.S_IMODE(target.stat().st_mode)  # what this filesystem keeps of 0o6775
    out = call_now(
        create_coding_tools(workspace), "write", path="tool.sh", content="#!/bin/sh\necho new\n"
    )
    assert not out.is_error, f"the write must succeed, got: {text_of(out)!r}"
    info = target.stat()
    assert (info.st_uid, info.st_gid) == owner, "the owner and group are kept where allowed"
    assert stat.S_IMODE(info.st_mode) == mode, (
        f"invariant: a replaced file keeps its permission bits, set-id bits included (mode "
        f"{mode:o}, got {stat.S_IMODE(info.st_mode):o}): chown clears them, so os.fchown the "
        "temp file first and os.fchmod it after"
    )
    only_expected_files(workspace, {"tool.sh"})


@pytest.mark.challenge
@pytest.mark.parametrize("fault", [None, "unsupported", "one-refused"])
def test_a_replaced_file_keeps_its_extended_attributes(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, fault: str | None
) -> None:
    if not hasattr(os, "setxattr"):
        pytest.skip("this platform has no os.setxattr")
    target = workspace / "download.bin"
    target.write_text("old\n")
    listxattr, getxattr = os.listxattr, os.getxattr  # as they are, before a fault
    try:
        os.setxattr(target, "user.origin", b"https://example.org")
        os.setxattr(target, "user.locked", b"1")
    except OSError:
        pytest.skip("this filesystem keeps no user extended attributes")
    if fault == "unsupported":  # a filesystem without extended attributes

        def unsupported(*args: object, **kwargs: object) -> list[str]:
            raise OSError(errno.ENOTSUP, os.strerror(errno.ENOTSUP))

        monkeypatch.setattr(os, "listxattr", unsupported)
    # The one refused is the one listed first: the rest must still be copied after it.
    refused = next(n for n in listxattr(target) if n.startswith("user."))
    if fault == "one-refused":  # security.* and trusted.* need rights a writer may lack
        real_setxattr = os.setxattr

        def setxattr(path: Any, attribute: str, *args: Any, **kwargs: Any) -> None:
            if attribute == refused:
                raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
            real_setxattr(path, attribute, *args, **kwargs)

        monkeypatch.setattr(os, "setxattr", setxattr)
    out = call_now(create_coding_tools(workspace), "write", path="download.bin", content="new\n")
    assert not out.is_error, (
        "invariant: extended attributes are kept where the filesystem and your rights allow; "
        "one that cannot be read or set is skipped, never a reason to fail the write. Got: "
        f"{text_of(out)!r}"
    )
    assert target.read_text() == "new\n"
    kept = {n: getxattr(target, n) for n in listxattr(target) if n.startswith("user.")}
    attributes = {"user.origin": b"https://example.org", "user.locked": b"1"}
    expected = {
        None: attributes,
        "unsupported": {},
        "one-refused": {n: v for n, v in attributes.items() if n != refused},
    }[fault]
    if fault != "unsupported":
        assert kept == expected, (
            "invariant: replacing a file keeps its extended attributes (os.listxattr, "
            "os.getxattr, os.setxattr on the temp file before the rename), each one that can "
            f"be set, also those after one that cannot: expected {expected}, got {kept}"
        )
    only_expected_files(workspace, {"download.bin"})


async def entered_within(entered: asyncio.Event, seconds: float) -> None:
    """Wait for the queue probe to see an operation enter, or fail over a time limit."""
    await finished_within(
        entered.wait(), seconds, f"no operation entered the queue within {seconds:g} s"
    )


# A writer in another process: "crash" stops it at the rename (the temp file is written)
# until it is killed; "leak" lets its rename fail and its cleanup do nothing, so that it
# lives on beside the temp file it left.
WRITER = """
import asyncio, os, sys, threading
from picourse.coding_tools import create_coding_tools
from picourse.tool import ToolContext

workspace, mode = sys.argv[1], sys.argv[2]

def rename(*args, **kwargs):
    if mode == "crash":
        print("ready", flush=True)
        threading.Event().wait()
    raise OSError(28, "No space left on device")

os.replace = os.rename = rename
if mode == "leak":
    os.unlink = os.remove = lambda *args, **kwargs: None
tool = create_coding_tools(workspace).get("write")
arguments = tool.schema.validate({"path": "f.txt", "content": "from another process\\n"})
asyncio.run(tool.execute(arguments, ToolContext("writer", None, None)))
print("done", flush=True)
sys.stdin.read()
"""


def start_writer(workspace: Path, mode: str) -> subprocess.Popen[str]:
    source = Path(picourse.__file__).resolve().parents[1]
    path = os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))
    # A wrong write may put its temp file in tempfile.gettempdir(); these writers are killed
    # or keep theirs, so give them a temp folder of the test's own, not the machine's.
    scratch = workspace.parent / f"{mode}-writer-tmp"
    scratch.mkdir(exist_ok=True)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(workspace), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": path, "TMPDIR": str(scratch)},
    )
    line = writer.stdout.readline().strip() if writer.stdout else ""  # blocks until it says
    if line != {"crash": "ready", "leak": "done"}[mode]:
        writer.kill()
        _, errors = writer.communicate()
        last = errors.strip().splitlines()[-1] if errors.strip() else ""
        if last.startswith("NotImplementedError: "):  # the stage is still a stub: say so
            raise NotImplementedError(last.removeprefix("NotImplementedError: "))
        raise AssertionError(f"the {mode} writer process did not get to its point: {errors}")
    return writer


@pytest.mark.challenge
@pytest.mark.parametrize("case", ["removable", "cannot-be-removed", "live-writer-of-another-user"])
def test_temp_files_of_killed_writers_are_removed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    removable = case != "cannot-be-removed"
    # The writers import picourse in processes of their own: the tools' code must be the
    # one this test runs beside (a grader reruns tests that patch the process there).
    monkeypatch.setenv("PICOURSE_WRITER_PROCESSES", "1")
    # A write still on its stub fails here, in this process, before two Python processes
    # start only to fail the same way.
    probe = workspace.parent / "probe"
    probe.mkdir()
    call_now(create_coding_tools(probe), "write", path="probe.txt", content="probe\n")
    live = start_writer(workspace, "leak")
    try:
        leaked = {p.name for p in workspace.iterdir()}
        crashed = start_writer(workspace, "crash")
        crashed.kill()  # killed between writing its temp file and the rename
        crashed.communicate()
        stale = {p.name for p in workspace.iterdir()} - leaked
        assert stale, "the killed writer left no temp file in the target's directory"
        # Many other files: a cleanup must look at every entry, whatever the order. Some only
        # contain a dead writer's temp name: they are the user's, not temp files. A copy's
        # name (other text, then the temp name) is one only where temp names begin with text
        # of their own: "copy of f.txt.pi-1-….tmp" is a temp name of "copy of f.txt".
        others = {f"note{n:02d}.txt" for n in range(40)}
        others |= {f"{name}.bak" for name in stale}
        others |= {f"copy of {name}" for name in stale if not name.startswith("f.txt")}
        for name in others:
            (workspace / name).write_text("keep\n")
        if not removable:  # another user's temp file in a shared (sticky) directory
            real_unlink, real_remove = os.unlink, os.remove

            def guarded(real: Callable[..., None]) -> Callable[..., None]:
                def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
                    if os.path.basename(os.fspath(path)) in stale:
                        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), path)
                    real(path, *args, **kwargs)

                return unlink

            monkeypatch.setattr(os, "unlink", guarded(real_unlink))
            monkeypatch.setattr(os, "remove", guarded(real_remove))
        if case == "live-writer-of-another-user":  # os.kill answers as it would for one
            real_kill = os.kill

            def kill(pid: int, signal: int) -> None:
                if pid == live.pid and signal == 0:
                    raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
                real_kill(pid, signal)

            monkeypatch.setattr(os, "kill", kill)
        out = call_now(create_coding_tools(workspace), "write", path="f.txt", content="mine\n")
        assert not out.is_error, (
            "invariant: a temp file that cannot be removed is no reason to fail the write. "
            f"Got: {text_of(out)!r}"
        )
        assert (workspace / "f.txt").read_text() == "mine\n"
        present = {p.name for p in workspace.iterdir()}
        assert present - leaked - others - stale == {"f.txt"}, (
            f"no temp file of this write may be left behind, found {sorted(present)}"
        )
        assert others <= present, (
            "invariant: only temp files are removed, by their whole name: a user's file whose "
            "name merely contains a dead writer's temp name (a backup of it, a copy) stays. "
            f"Match the whole name (re.fullmatch), never re.search. Gone: {others - present}"
        )
        assert leaked <= present, (
            "invariant: only temp files of dead writers are removed; the live writer's temp "
            "file must stay (os.kill(pid, 0) succeeds for a live process, and raises "
            "PermissionError for another user's: only ProcessLookupError means it is gone). "
            f"Gone: {sorted(leaked - present)}"
        )
        if removable:
            assert not present & stale, (
                "invariant: a write removes the temp files that killed writers left in its "
                "directory (a crash between creating the temp file and the rename): put the "
                "process id in the temp name and remove a temp file whose process is gone "
                f"(os.kill(pid, 0) raises ProcessLookupError). Left: {sorted(present & stale)}"
            )
    finally:
        _, errors = live.communicate("")  # its stdin closes: it ends normally
    assert live.returncode == 0, (
        "invariant: looking for dead writers never disturbs a live process: os.kill(pid, 0) "
        f"only asks; the live writer ended with {live.returncode}: {errors}"
    )


def test_a_file_that_became_a_symlink_since_the_last_write_stays_one(workspace: Path) -> None:
    registry = create_coding_tools(workspace)
    assert not call_now(registry, "write", path="a.txt", content="first\n").is_error
    (workspace / "b.txt").write_text("b\n")
    os.replace(workspace / "a.txt", workspace / "old-a.txt")
    os.symlink("b.txt", workspace / "a.txt")  # a.txt leads to b.txt now
    out = call_now(registry, "write", path="a.txt", content="second\n")
    assert not out.is_error and (workspace / "a.txt").is_symlink(), (
        "invariant: a symlink stays a symlink, also one that was a plain file at the last "
        "write: compute canonical_key(path) (the real path) on every call, never remember "
        f"it. Got: {text_of(out)!r}, a.txt a symlink: {(workspace / 'a.txt').is_symlink()}"
    )
    assert (workspace / "b.txt").read_text() == "second\n", "the write goes to b.txt"


def test_a_write_through_a_symlinked_file_makes_its_temp_file_beside_the_real_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "real.txt").write_text("old\n")
    os.symlink("sub/real.txt", workspace / "link.txt")
    opens = watch_opens(monkeypatch)
    out = call_now(create_coding_tools(workspace), "write", path="link.txt", content="new\n")
    assert not out.is_error and (workspace / "sub" / "real.txt").read_text() == "new\n"
    beside_the_link = [
        name
        for name, _ in opens
        if Path(name).parent == workspace and Path(name).name not in ("link.txt", "sub")
    ]
    assert not beside_the_link and (workspace / "link.txt").is_symlink(), (
        "a write through a symlinked file makes its temp file in the real file's folder "
        "(the directory of os.path.realpath(target)), not beside the link: a rename is "
        f"atomic only within one folder's filesystem. Opened beside the link: {beside_the_link}"
    )


@pytest.mark.parametrize("link", ["folder", "file"])
def test_write_details_name_the_joined_path_not_the_resolved_one(
    workspace: Path, link: str
) -> None:
    (workspace / "real").mkdir()
    if link == "folder":
        os.symlink("real", workspace / "alias")
        path, target = "alias/f.txt", workspace / "real" / "f.txt"
    else:
        (workspace / "real" / "f.txt").write_text("old\n")
        os.symlink("real/f.txt", workspace / "alias.txt")
        path, target = "alias.txt", workspace / "real" / "f.txt"
    out = call_now(create_coding_tools(workspace), "write", path=path, content="héllo\n")
    assert not out.is_error, (
        f"a write through a symlink inside the workspace succeeds: {text_of(out)}"
    )
    assert target.read_text() == "héllo\n"
    assert out.details == WriteDetails(str(workspace / path), 7), (
        "invariant: WriteDetails.path is what resolve_path returned (the working directory "
        "joined with path, symlinks NOT resolved), as ReadDetails.path is; only the queue key "
        f"is the real path. Expected {str(workspace / path)!r}, got {out.details!r}"
    )
