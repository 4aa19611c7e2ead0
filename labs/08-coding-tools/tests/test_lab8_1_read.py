"""Lab 8.1 — read reports only complete observations.

These tests run with containment="unrestricted" because containment is Lab 8.2's job.
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lab_helpers import call_now, text_of, utf8_len
from picourse.coding_tools import ReadDetails, create_coding_tools
from picourse.tool import ToolRegistry

pytestmark = pytest.mark.lab8_1


def tools(workspace: Path, **limits: Any) -> ToolRegistry:
    return create_coding_tools(workspace, "unrestricted", **limits)


def numbered(lines: list[str], start: int = 1) -> str:
    return "\n".join(f"{n:>4}│ {line}" for n, line in enumerate(lines, start))


def write_lines(path: Path, count: int, width: int = 10) -> list[str]:
    lines = [f"line {n}".ljust(width, ".") for n in range(1, count + 1)]
    path.write_text("\n".join(lines) + "\n")
    return lines


def test_lines_are_numbered_and_details_describe_the_file(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    out = call_now(tools(workspace), "read", path="a.txt")
    assert not out.is_error, f"reading an ordinary file must succeed, got: {text_of(out)}"
    assert text_of(out) == "   1│ alpha\n   2│ beta", (
        "each line must be shown as f'{n:>4}│ {line}', lines joined by \\n, with no notice "
        "when the whole file fits"
    )
    assert out.details == ReadDetails(str(workspace / "a.txt"), 11, 2, 1, 2, False), (
        "details must be ReadDetails(path=cwd joined with the argument, bytes=file size, "
        "lines=total lines, start_line, end_line=last shown, truncated)"
    )


@pytest.mark.parametrize(
    ("content", "total"), [("a\nb\n", 2), ("a\nb", 2), ("\n", 1), ("a", 1), ("a\n\nb\n", 3)]
)
def test_lines_are_split_on_newline_and_a_final_newline_adds_none(
    workspace: Path, content: str, total: int
) -> None:
    (workspace / "f.txt").write_text(content)
    out = call_now(tools(workspace), "read", path="f.txt")
    assert out.details.lines == total, (
        f"{content!r} has {total} lines: a final \\n ends the last line, it does not start one"
    )
    assert text_of(out) == numbered(content.split("\n")[:total])


def test_an_empty_file_is_an_empty_successful_read(workspace: Path) -> None:
    (workspace / "empty.txt").write_text("")
    out = call_now(tools(workspace), "read", path="empty.txt")
    assert not out.is_error, "an empty file read at offset 1 is a success, not an error"
    assert text_of(out) == ""
    assert out.details == ReadDetails(str(workspace / "empty.txt"), 0, 0, 1, 0, False), (
        "for an empty file: 0 lines, end_line = start_line - 1, nothing truncated"
    )


def test_offset_and_limit_select_a_window_with_a_continuation_notice(workspace: Path) -> None:
    lines = write_lines(workspace / "f.txt", 10)
    out = call_now(tools(workspace), "read", path="f.txt", offset=3, limit=4)
    assert text_of(out) == numbered(lines[2:6], 3) + (
        "\n\n[Showing lines 3-6 of 10; continue with offset=7]"
    ), "a window of lines 3-6 must end with a blank line and the exact continuation notice"
    assert (out.details.start_line, out.details.end_line, out.details.truncated) == (3, 6, True)


def test_the_last_window_has_no_notice(workspace: Path) -> None:
    lines = write_lines(workspace / "f.txt", 10)
    out = call_now(tools(workspace), "read", path="f.txt", offset=8, limit=50)
    assert text_of(out) == numbered(lines[7:], 8), "nothing remains after line 10: no notice"
    assert out.details.truncated is False


def test_max_read_lines_caps_the_window_even_when_limit_is_larger(workspace: Path) -> None:
    write_lines(workspace / "f.txt", 30)
    out = call_now(tools(workspace, max_read_lines=12), "read", path="f.txt", limit=20)
    assert out.details.end_line == 12, "max_read_lines=12 must cap a request for 20 lines"
    assert text_of(out).endswith("[Showing lines 1-12 of 30; continue with offset=13]")


def test_the_byte_budget_includes_the_notice_and_shows_only_whole_lines(
    workspace: Path,
) -> None:
    lines = write_lines(workspace / "f.txt", 50, width=40)
    out = call_now(tools(workspace, max_read_bytes=500), "read", path="f.txt")
    body = text_of(out)
    assert utf8_len(body) <= 500, "the whole text, notice included, must fit in max_read_bytes"
    shown = out.details.end_line
    assert body == numbered(lines[:shown]) + (
        f"\n\n[Showing lines 1-{shown} of 50; continue with offset={shown + 1}]"
    ), "only whole lines may be shown, and the notice must continue right after the last one"
    one_more = numbered(lines[: shown + 1]) + (
        f"\n\n[Showing lines 1-{shown + 1} of 50; continue with offset={shown + 2}]"
    )
    assert utf8_len(one_more) > 500, "the window must be as long as the budget allows"


def test_the_byte_budget_counts_utf8_bytes_not_characters(workspace: Path) -> None:
    lines = ["é" * 30 for _ in range(20)]  # 60 bytes, 30 characters each
    (workspace / "u.txt").write_text("\n".join(lines) + "\n")
    out = call_now(tools(workspace, max_read_bytes=400), "read", path="u.txt")
    assert utf8_len(text_of(out)) <= 400, "max_read_bytes counts UTF-8 bytes (é is 2 bytes)"
    assert out.details.end_line == 5, (
        "five 68-byte lines plus the notice fit in 400 bytes (counting characters would show 9)"
    )


def test_paging_with_the_notice_sees_every_line_exactly_once(workspace: Path) -> None:
    # Varied widths and multi-byte characters, read in small pages: following each notice
    # must reproduce the file exactly, with no line skipped, repeated or cut.
    lines = [("ünïcødé-" if n % 3 == 0 else "x") * (n % 17) + f"#{n}" for n in range(1, 200)]
    (workspace / "f.txt").write_text("\n".join(lines) + "\n")
    registry = tools(workspace, max_read_bytes=300, max_read_lines=7)
    seen: list[str] = []
    offset = 1
    for _ in range(400):
        out = call_now(registry, "read", path="f.txt", offset=offset)
        assert not out.is_error, f"reading at offset={offset} failed: {text_of(out)}"
        assert utf8_len(text_of(out)) <= 300, f"the page at offset={offset} exceeds the budget"
        body = text_of(out).split("\n\n[Showing")[0]
        for row in body.split("\n"):
            number, _, line = row.partition("│ ")
            assert int(number) == len(seen) + 1, (
                "each page must start right after the last line of the previous one"
            )
            seen.append(line)
        if not out.details.truncated:
            break
        assert f"continue with offset={out.details.end_line + 1}]" in text_of(out)
        offset = out.details.end_line + 1
    assert seen == lines, "following the notices must show every line once, whole and in order"


def test_an_offset_beyond_the_end_is_an_error(workspace: Path) -> None:
    write_lines(workspace / "f.txt", 5)
    out = call_now(tools(workspace), "read", path="f.txt", offset=6)
    assert out.is_error, "an offset past the last line must be an error, not an empty success"
    assert "offset=6 is beyond the end of the file (5 lines)" in text_of(out)


def test_a_first_line_that_cannot_fit_is_an_error_not_a_cut_line(workspace: Path) -> None:
    (workspace / "f.txt").write_text("short\n" + "x" * 500 + "\nafter\n")
    registry = tools(workspace, max_read_bytes=200)
    first = call_now(registry, "read", path="f.txt")
    assert first.details.end_line == 1, "the window must stop before a line that does not fit"
    assert "continue with offset=2" in text_of(first)
    out = call_now(registry, "read", path="f.txt", offset=2)
    assert out.is_error, "a line longer than the budget must never be returned cut in half"
    assert "too small to return a complete line starting at line 2" in text_of(out)
    assert "xxxxxxxxxx" not in text_of(out), "the error must not include part of the line"


def test_details_path_is_the_joined_path_not_the_symlink_target(workspace: Path) -> None:
    (workspace / "real.txt").write_text("x\n")
    os.symlink(workspace / "real.txt", workspace / "alias.txt")
    out = call_now(tools(workspace), "read", path="alias.txt")
    assert out.details.path == str(workspace / "alias.txt"), (
        "details.path is cwd joined with the argument, not the canonical (resolved) path"
    )


@pytest.mark.parametrize(
    ("make", "expect"),
    [
        (lambda d: None, "not found"),
        (lambda d: (d / "f.txt").mkdir(), "directory"),
        (lambda d: (d / "f.txt").write_bytes(b"\x7fELF\x00\x00\x01binary"), "binary"),
        (lambda d: (d / "f.txt").write_bytes(b"caf\xe9 latin-1\n"), "UTF-8"),
    ],
    ids=["missing", "directory", "binary", "invalid-utf8"],
)
def test_unreadable_targets_are_clear_error_results(
    workspace: Path, make: Callable[[Path], object], expect: str
) -> None:
    make(workspace)
    out = call_now(tools(workspace), "read", path="f.txt")
    assert out.is_error, f"reading a {expect} target must be an error result, not garbage"
    assert expect.lower() in text_of(out).lower(), (
        f"the error must say what is wrong ({expect!r}), got: {text_of(out)}"
    )


@pytest.mark.challenge
def test_a_window_of_a_huge_file_uses_memory_bounded_by_the_window(workspace: Path) -> None:
    path = workspace / "huge.log"
    block = b"".join(b"%07d " % n + b"y" * 92 + b"\n" for n in range(10_000))  # 1 MB
    with open(path, "wb") as file:
        for _ in range(300):  # 300 MB, 3 million lines
            file.write(block)
    registry = tools(workspace)
    tracemalloc.start()
    try:
        first = call_now(registry, "read", path="huge.log")
        last = call_now(registry, "read", path="huge.log", offset=2_999_900)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first.details.lines == 3_000_000 and last.details.end_line == 3_000_000
    assert text_of(last).startswith("2999900│ "), "the last window must start at its offset"
    assert peak < 16 * 2**20, (
        f"reading a window of a 300 MB file allocated {peak / 2**20:.0f} MiB at peak: stream it "
        "in chunks instead of loading the file"
    )


@pytest.mark.challenge
def test_a_file_changed_between_reads_is_read_afresh(workspace: Path) -> None:
    # Several MB, so that an implementation that remembers line positions would use them.
    path = workspace / "log.txt"
    lines = [f"{n:07d} " + "a" * 60 for n in range(60_000)]
    path.write_text("\n".join(lines) + "\n")
    registry = tools(workspace)
    before = call_now(registry, "read", path="log.txt", offset=59_990)
    assert before.details.lines == 60_000
    data = bytearray(path.read_bytes())
    for at in range(100, len(data) // 2, 997):  # same size, different line breaks
        data[at] = ord("\n")
    path.write_bytes(bytes(data))
    expected = bytes(data).decode().split("\n")[:-1]
    after = call_now(registry, "read", path="log.txt", offset=len(expected) - 5)
    assert after.details.lines == len(expected), (
        "a file rewritten between two reads must be counted again, not from memory"
    )
    assert text_of(after).split("\n")[0] == f"{len(expected) - 5:>4}│ {expected[-6]}"
