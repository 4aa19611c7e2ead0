"""Lab 8.1 — read reports only complete observations.

These tests run with containment="unrestricted" because containment is Lab 8.2's job.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import errno
import itertools
import mmap
import os
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lab_helpers import (
    AbortsOnceLookedAt,
    call,
    call_now,
    call_without_threads,
    descriptors_on,
    end_or_release,
    opened_on_this_thread,
    play_fifo_writer,
    run,
    socket_target,
    text_of,
    utf8_len,
    watch_opens,
)
from picourse.abort import AbortController, AbortSignal
from picourse.coding_tools import ReadDetails, create_coding_tools
from picourse.coding_tools.errors import describe_os_error
from picourse.tool import ToolOutput, ToolRegistry

pytestmark = pytest.mark.lab8_1


def tools(workspace: Path, **limits: Any) -> ToolRegistry:
    return create_coding_tools(workspace, "unrestricted", **limits)


def numbered(lines: list[str], start: int = 1) -> str:
    return "\n".join(f"{n:>4}│ {line}" for n, line in enumerate(lines, start))


def write_lines(path: Path, count: int, width: int = 10) -> list[str]:
    lines = [f"line {n}".ljust(width, ".") for n in range(1, count + 1)]
    path.write_text("\n".join(lines) + "\n")
    return lines


def fresh_read(
    path: Path, lines: list[str], offset: int, most: int, budget: int
) -> tuple[str, ReadDetails]:
    """What a read of ``path`` (whose lines all fit the budget) shows, as the handout says:
    the longest window of at most ``most`` lines from ``offset`` that fits ``budget``
    bytes together with its notice, and its details."""
    total = len(lines)
    for count in range(min(most, total - offset + 1), 0, -1):
        end = offset + count - 1
        text = numbered(lines[offset - 1 : end], offset)
        if end < total:
            text += f"\n\n[Showing lines {offset}-{end} of {total}; continue with offset={end + 1}]"
        if utf8_len(text) <= budget:
            size = path.stat().st_size
            return text, ReadDetails(str(path), size, total, offset, end, end < total)
    raise AssertionError(f"the test's line {offset} must fit in {budget} bytes")


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


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        ("one\r\ntwo\r\n", ["one\r", "two\r"]),
        ("a\rb\x0cc\x0bd\x1ce\x85f\u2028g\u2029h\n", ["a\rb\x0cc\x0bd\x1ce\x85f\u2028g\u2029h"]),
        ("lone\r", ["lone\r"]),
    ],
    ids=["crlf", "other-line-breaks", "final-cr"],
)
def test_only_newline_ends_a_line(workspace: Path, content: str, shown: list[str]) -> None:
    (workspace / "f.txt").write_bytes(content.encode())
    out = call_now(tools(workspace), "read", path="f.txt")
    assert not out.is_error, f"reading {content!r} must succeed, got: {text_of(out)}"
    assert (text_of(out), out.details.lines) == (numbered(shown), len(shown)), (
        "lines end at \\n and nowhere else: a \\r (also the one of CRLF), form feed, vertical "
        "tab and Unicode separators stay part of their line. str.splitlines() splits on all "
        "of them; split the bytes on b'\\n' instead"
    )


def test_a_byte_order_mark_is_shown_as_it_is(workspace: Path) -> None:
    (workspace / "bom.txt").write_bytes(b"\xef\xbb\xbfone\ntwo\n")
    out = call_now(tools(workspace), "read", path="bom.txt")
    assert text_of(out) == numbered(["\ufeffone", "two"]), (
        "a UTF-8 byte order mark is part of the file: read shows it as U+FEFF at the start of "
        "line 1, as it shows every other byte (an edit that copies line 1 from the read must "
        f"find it; Lab 8.9 relies on it). Got: {text_of(out)!r}"
    )


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
    assert out.details == ReadDetails(str(workspace / "f.txt"), 110, 10, 3, 6, True), (
        "details of a window: lines is the file's total (10), not the window's end; "
        "bytes is the file's size; end_line is the last line shown"
    )


def test_the_last_window_has_no_notice(workspace: Path) -> None:
    lines = write_lines(workspace / "f.txt", 10)
    out = call_now(tools(workspace), "read", path="f.txt", offset=8, limit=50)
    assert text_of(out) == numbered(lines[7:], 8), "nothing remains after line 10: no notice"
    assert out.details.truncated is False


@pytest.mark.parametrize(
    ("content", "limits", "args"),
    [
        ("".join(f"line {n}\n" for n in range(1, 11)), {}, {"offset": 8, "limit": 3}),
        ("".join(f"line {n}\n" for n in range(1, 11)), {}, {"limit": 10}),
        ("".join(f"line {n}\n" for n in range(1, 11)), {"max_read_lines": 10}, {}),
        ("one\ntwo\nthree", {}, {"limit": 3}),
    ],
    ids=["offset-8-limit-3", "limit-10", "max-read-lines-10", "no-final-newline-limit-3"],
)
def test_a_full_window_that_ends_on_the_last_line_has_no_notice(
    workspace: Path, content: str, limits: dict[str, int], args: dict[str, int]
) -> None:
    (workspace / "f.txt").write_text(content)
    lines = content.splitlines()
    out = call_now(tools(workspace, **limits), "read", path="f.txt", **args)
    offset = args.get("offset", 1)
    assert text_of(out) == numbered(lines[offset - 1 :], offset), (
        "a window that holds exactly as many lines as it may and ends on the file's last "
        "line leaves nothing to continue with: no '[Showing ...]' notice. Whether more "
        f"remains depends on the lines left, not on the window being full. Got: {text_of(out)!r}"
    )
    assert out.details.truncated is False and out.details.end_line == len(lines)


def test_max_read_lines_caps_the_window_even_when_limit_is_larger(workspace: Path) -> None:
    write_lines(workspace / "f.txt", 30)
    out = call_now(tools(workspace, max_read_lines=12), "read", path="f.txt", limit=20)
    assert out.details.end_line == 12, "max_read_lines=12 must cap a request for 20 lines"
    assert out.details.lines == 30, "ReadDetails.lines counts the whole file, not the window"
    assert text_of(out).endswith("[Showing lines 1-12 of 30; continue with offset=13]")


@pytest.mark.parametrize("cap", ["limit", "max_read_lines"])
def test_a_last_line_without_newline_counts_against_the_limit_too(
    workspace: Path, cap: str
) -> None:
    (workspace / "f.txt").write_text("one\ntwo\nthree")  # no final newline
    if cap == "limit":
        out = call_now(tools(workspace), "read", path="f.txt", limit=2)
    else:
        out = call_now(tools(workspace, max_read_lines=2), "read", path="f.txt")
    assert text_of(out) == numbered(["one", "two"]) + (
        "\n\n[Showing lines 1-2 of 3; continue with offset=3]"
    ), (
        f"a window of 2 lines ({cap}=2) holds 2 lines: the last line, though it has no "
        f"final newline, is a line like any other and waits for the next page. Got: "
        f"{text_of(out)!r}"
    )
    assert out.details.end_line == 2 and out.details.truncated is True


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


def test_the_byte_budget_holds_where_line_numbers_grow_wider(workspace: Path) -> None:
    # From line 10000 on, a line's number takes five digits: its prefix is a byte longer.
    lines = write_lines(workspace / "f.txt", 10_006, width=12)
    offset = 9_998

    def page(last: int) -> str:
        notice = f"[Showing lines {offset}-{last} of 10006; continue with offset={last + 1}]"
        return numbered(lines[offset - 1 : last], offset) + "\n\n" + notice

    rest = utf8_len(numbered(lines[offset - 1 :], offset))  # from here on, no notice
    for budget in range(utf8_len(page(offset)), min(rest, utf8_len(page(10_005)))):
        out = call_now(tools(workspace, max_read_bytes=budget), "read", path="f.txt", offset=offset)
        body, shown = text_of(out), out.details.end_line
        assert utf8_len(body) <= budget and body == page(shown), (
            f"with max_read_bytes={budget}, the page at offset={offset} must fit the budget, "
            "notice included, counting each line's prefix as it is printed: "
            "f'{number:>4}│ ' is wider from line 10000 on (never a fixed width). Got "
            f"{utf8_len(body)} bytes: {body!r}"
        )
        assert utf8_len(page(shown + 1)) > budget, (
            f"with max_read_bytes={budget}, one more line would still have fit: the window "
            f"must be as long as the budget allows. Got: {body!r}"
        )


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


@pytest.mark.parametrize(
    ("content", "offset", "total"),
    [("l\n" * 5, 6, 5), ("only\n", 2, 1), ("", 2, 0), ("a\nb", 3, 2), ("a\nb", 4, 2)],
)
def test_an_offset_beyond_the_end_is_an_error(
    workspace: Path, content: str, offset: int, total: int
) -> None:
    (workspace / "f.txt").write_text(content)
    out = call_now(tools(workspace), "read", path="f.txt", offset=offset)
    assert out.is_error, "an offset past the last line must be an error, not an empty success"
    last = max(total, 1)
    assert (
        f"offset={offset} is beyond the end of the file ({total} lines). "
        f"Use an offset between 1 and {last}" in text_of(out)
    ), (
        f"offset={offset} is past the last line of a file of {total} lines, and the error "
        f"must name the offsets that work: 1 to {last} (only an empty file may be read at "
        f"offset 1, so the last is max(total, 1)); got: {text_of(out)!r}"
    )


@pytest.mark.parametrize(
    "content", ["abc", "abc\n", "abc\nde", "abc\nde\n"], ids=["one", "one-nl", "two", "two-nl"]
)
def test_a_file_that_fills_the_budget_exactly_is_shown_whole(workspace: Path, content: str) -> None:
    (workspace / "f.txt").write_text(content)
    whole = numbered(content.split("\n")[: content.count("\n") + (not content.endswith("\n"))])
    exact = call_now(tools(workspace, max_read_bytes=utf8_len(whole)), "read", path="f.txt")
    assert text_of(exact) == whole, (
        f"the whole text takes exactly max_read_bytes={utf8_len(whole)} bytes: it fits "
        "(the budget is 'at most', <=, not <), so it is shown whole with no notice"
    )


@pytest.mark.parametrize("ending", ["\n", ""], ids=["newline", "no-final-newline"])
def test_a_first_line_that_cannot_fit_is_an_error_not_a_cut_line(
    workspace: Path, ending: str
) -> None:
    (workspace / "f.txt").write_text("short\n" + "x" * 500 + "\nafter" + ending)
    registry = tools(workspace, max_read_bytes=200)
    first = call_now(registry, "read", path="f.txt")
    assert text_of(first) == numbered(["short"]) + (
        "\n\n[Showing lines 1-1 of 3; continue with offset=2]"
    ), (
        "the window must stop before a line that does not fit, and show nothing after it: "
        "not the short last line either, with or without its final newline (a window never "
        f"skips a line). Got: {text_of(first)!r}"
    )
    out = call_now(registry, "read", path="f.txt", offset=2)
    assert out.is_error, "a line longer than the budget must never be returned cut in half"
    assert "too small to return a complete line starting at line 2" in text_of(out)
    assert "xxxxxxxxxx" not in text_of(out), "the error must not include part of the line"


def test_a_first_line_that_fits_only_without_its_notice_is_refused(workspace: Path) -> None:
    lines = write_lines(workspace / "f.txt", 3, width=20)
    alone = utf8_len(numbered(lines[:1]))
    with_notice = utf8_len(
        numbered(lines[:1]) + "\n\n[Showing lines 1-1 of 3; continue with offset=2]"
    )
    for budget in (alone, (alone + with_notice) // 2, with_notice - 1):
        out = call_now(tools(workspace, max_read_bytes=budget), "read", path="f.txt")
        assert out.is_error and (
            "too small to return a complete line starting at line 1" in text_of(out)
        ), (
            f"with max_read_bytes={budget}, line 1 fits alone ({alone} bytes) but not with the "
            f"notice that must follow it ({with_notice} bytes): the text, notice included, "
            "never exceeds the budget, so this is the 'too small' error. Got "
            f"{utf8_len(text_of(out))} bytes: {text_of(out)!r}"
        )


def test_a_last_line_without_newline_that_cannot_fit_is_refused_too(workspace: Path) -> None:
    (workspace / "f.txt").write_text("short\n" + "x" * 500)  # no final newline
    registry = tools(workspace, max_read_bytes=200)
    first = call_now(registry, "read", path="f.txt")
    assert text_of(first) == numbered(["short"]) + (
        "\n\n[Showing lines 1-1 of 2; continue with offset=2]"
    ), "a last line that does not fit must end the window, even without a final newline"
    out = call_now(registry, "read", path="f.txt", offset=2)
    assert out.is_error, (
        "a last line longer than the budget must be refused like any other, not cut to fit"
    )
    assert "too small to return a complete line starting at line 2" in text_of(out)
    assert "xxxxxxxxxx" not in text_of(out), "the error must not include part of the line"


@pytest.mark.parametrize("char", ["x", "é"], ids=["ascii", "two-byte"])
@pytest.mark.parametrize("ending", ["\n", ""], ids=["newline", "no-final-newline"])
def test_a_files_only_line_that_cannot_fit_is_refused_not_cut(
    workspace: Path, ending: str, char: str
) -> None:
    (workspace / "f.txt").write_text(char * 500 + ending)
    out = call_now(tools(workspace, max_read_bytes=100), "read", path="f.txt")
    assert out.is_error, (
        "invariant: a line is shown whole or not at all, also when it is the file's only "
        "line and no notice is needed: refuse it, never cut it to fit the budget. Got: "
        f"{text_of(out)[:120]!r}"
    )
    assert "too small to return a complete line starting at line 1" in text_of(out), (
        "a line that cannot fit is refused as too small, whatever its characters. The file "
        "is valid UTF-8: the max_read_bytes + 1 bytes you keep of a long line may end inside "
        "a character, so never decode a line that does not fit. Got: "
        f"{text_of(out)[:160]!r}"
    )
    assert char * 10 not in text_of(out), "the error must not include part of the line"


def reads_with_peak(
    registry: ToolRegistry, path: str, *offsets: int | None
) -> tuple[list[ToolOutput], int]:
    """Read ``path`` at each offset in turn (None: no offset given) under tracemalloc;
    the results and the most memory allocated at once."""
    tracemalloc.start()
    try:
        outs = [
            call_now(registry, "read", path=path, **({} if offset is None else {"offset": offset}))
            for offset in offsets
        ]
        return outs, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_is_bounded_by_the_window_not_the_file_or_one_line(workspace: Path) -> None:
    # A 64 MiB file whose middle line alone is 64 MiB: neither the file nor that line may
    # be held in memory; a window of the lines around it is all a read keeps.
    with open(workspace / "huge.txt", "wb") as file:
        file.write(b"first\n")
        for _ in range(64):
            file.write(b"x" * 2**20)
        file.write(b"\nlast\n")
    (first, middle, last), peak = reads_with_peak(tools(workspace), "huge.txt", None, 2, 3)
    assert text_of(first) == numbered(["first"]) + (
        "\n\n[Showing lines 1-1 of 3; continue with offset=2]"
    ), "the huge line ends the window, and the notice still counts every line of the file"
    assert middle.is_error and "too small to return a complete line" in text_of(middle)
    assert text_of(last) == "   3│ last"
    assert peak < 16 * 2**20, (
        f"reading windows of a 64 MiB file with a 64 MiB line allocated {peak / 2**20:.0f} "
        "MiB at peak: memory must be bounded by the window. Read binary chunks of about "
        "1 MiB, count newlines in them, and keep at most max_read_bytes of a line"
    )


def test_a_long_line_is_kept_to_max_read_bytes_however_many_chunks_it_spans(
    workspace: Path,
) -> None:
    # One line of 24 MiB under max_read_bytes=1 MiB: it spans many chunks, and at most
    # max_read_bytes + 1 bytes of it are kept in all, not that much of every chunk.
    with open(workspace / "long.txt", "wb") as file:
        for _ in range(24):
            file.write(b"y" * 2**20)
        file.write(b"\nafter\n")
    (out,), peak = reads_with_peak(tools(workspace, max_read_bytes=2**20), "long.txt", None)
    assert out.is_error and "too small to return a complete line" in text_of(out)
    assert peak < 12 * 2**20, (
        f"reading a 24 MiB line with max_read_bytes=1 MiB allocated {peak / 2**20:.0f} MiB at "
        "peak: keep at most max_read_bytes + 1 bytes of the line being assembled in all, "
        "across chunks (the room left is max_read_bytes + 1 minus what is kept already), "
        "not that much of each chunk"
    )


def test_memory_is_bounded_by_the_byte_budget_not_by_the_line_limit(workspace: Path) -> None:
    # 80 lines of 400 KiB (32 MiB), each well within max_read_bytes=1 MiB alone: two fit
    # the budget together, a third does not. The line limit (240) would allow all 80, so
    # a read that keeps lines until the limit and only then cuts the window to the budget
    # holds the whole file.
    width = 400 * 2**10
    with open(workspace / "wide.txt", "wb") as file:
        for n in range(1, 81):
            file.write(b"%03d " % n + b"w" * (width - 4) + b"\n")
    (out,), peak = reads_with_peak(tools(workspace, max_read_bytes=2**20), "wide.txt", None)
    lines = [f"{n:03d} " + "w" * (width - 4) for n in (1, 2)]
    assert text_of(out) == numbered(lines) + (
        "\n\n[Showing lines 1-2 of 80; continue with offset=3]"
    ), "two lines of 400 KiB and the notice fit in max_read_bytes=1 MiB, three do not"
    assert peak < 16 * 2**20, (
        f"reading a window of 1 MiB allocated {peak / 2**20:.0f} MiB at peak: memory must be "
        "bounded by the window, and the window by max_read_bytes as much as by the line "
        "limit. Keep a line only while the lines kept so far still fit the byte budget "
        "together; once one does not, only count the rest"
    )


def test_details_path_is_the_joined_path_not_the_symlink_target(workspace: Path) -> None:
    (workspace / "real.txt").write_text("x\n")
    os.symlink(workspace / "real.txt", workspace / "alias.txt")
    out = call_now(tools(workspace), "read", path="alias.txt")
    assert out.details.path == str(workspace / "alias.txt"), (
        "details.path is cwd joined with the argument, not the canonical (resolved) path"
    )


@pytest.mark.parametrize(
    ("make", "expect", "offset"),
    [
        (lambda d: None, ["not found"], 1),
        (lambda d: (d / "f.txt").mkdir(), ["directory"], 1),
        (lambda d: (d / "f.txt").write_bytes(b"\x7fELF\x00\x00\x01binary"), ["binary"], 1),
        # the NUL is in the first 8192 bytes but on line 501, past the default window
        (lambda d: (d / "f.txt").write_bytes(b"text line\n" * 500 + b"\x00\n"), ["binary"], 1),
        # the NUL is on line 1, before a window that starts at line 2: the first 8192
        # bytes of the file decide, wherever the window starts
        (lambda d: (d / "f.txt").write_bytes(b"a\x00b\n" + b"clean text\n" * 3), ["binary"], 2),
        (lambda d: (d / "f.txt").write_bytes(b"caf\xe9 latin-1\n"), ["UTF-8", "line 1"], 1),
        # the window starts at line 2, and its second line is the first that is not UTF-8
        (lambda d: (d / "f.txt").write_bytes(b"ok\nok\ncaf\xe9\nok\n"), ["UTF-8", "line 3"], 2),
    ],
    ids=[
        "missing",
        "directory",
        "binary",
        "binary-past-the-window",
        "binary-before-the-window",
        "invalid-utf8",
        "invalid-utf8-inside-the-window",
    ],
)
def test_unreadable_targets_are_clear_error_results(
    workspace: Path, make: Callable[[Path], object], expect: list[str], offset: int
) -> None:
    make(workspace)
    out = call_now(tools(workspace), "read", path="f.txt", offset=offset)
    assert out.is_error, f"reading a {expect[0]} target must be an error result, not garbage"
    for words in expect:
        assert words.lower() in text_of(out).lower(), (
            f"the error must say what is wrong ({words!r}; a line that is not UTF-8 is "
            f"named by its number in the file), got: {text_of(out)}"
        )
    assert "f.txt" in text_of(out) and str(workspace) not in text_of(out), (
        "invariant: an error about the file names it as path gave it ('f.txt'), not as the "
        "absolute path the tool made of it, so the model knows which file it is about; "
        f"got: {text_of(out)}"
    )


def test_the_first_line_that_is_not_utf8_is_named(workspace: Path) -> None:
    # Lines 2 and 4 are not UTF-8: the error names line 2, the first of the window.
    (workspace / "f.txt").write_bytes(b"ok\ncaf\xe9\nok\nna\xefve\nok\n")
    out = call_now(tools(workspace), "read", path="f.txt")
    assert out.is_error and "line 2" in text_of(out) and "line 4" not in text_of(out), (
        "invariant: the error names the first line of the window that is not UTF-8 (line "
        "2 here, not line 4): stop at the first line that fails to decode; got: "
        f"{text_of(out)}"
    )


@pytest.mark.parametrize(("nul_at", "binary"), [(0, True), (8191, True), (8192, False)])
def test_only_a_nul_in_the_first_8192_bytes_makes_a_file_binary(
    workspace: Path, nul_at: int, binary: bool
) -> None:
    # 127 lines of 64 bytes and 63 bytes more: the next byte is byte 8191 (counting from 0).
    head = (b"y" * 63 + b"\n") * 127 + b"z" * 63
    tail = b"\x00tail\n" if binary else b"\n\x00tail\n"
    content = b"\x00" + head[1:] + b"\ntail\n" if nul_at == 0 else head + tail
    (workspace / "f.txt").write_bytes(content)
    assert (workspace / "f.txt").read_bytes().index(b"\x00") == nul_at
    out = call_now(tools(workspace), "read", path="f.txt")
    if binary:
        where = "the first byte of the file" if nul_at == 0 else "the last of the first 8192"
        assert out.is_error and "binary" in text_of(out), (
            f"the NUL is byte {nul_at}, {where}: the file is binary (a NUL anywhere in the "
            "first 8192 bytes, byte 0 included: `b'\\0' in head`, not `head.find(...) > 0`)"
        )
    else:
        assert not out.is_error and "\x00tail" in text_of(out), (
            f"the NUL is byte {nul_at}, the first past the first 8192 bytes: the file is "
            "text. Look for NUL in those 8192 bytes only, not in the whole first chunk you "
            f"read; got: {text_of(out)[:200]!r}"
        )


def test_read_opens_and_reads_the_file_in_a_worker_thread(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "threaded.txt").write_text("one\ntwo\n")
    registry = tools(workspace)
    opens = watch_opens(monkeypatch)
    out = call_now(registry, "read", path="threaded.txt")
    assert text_of(out) == numbered(["one", "two"])
    assert any(path.endswith("threaded.txt") for path, _ in opens), (
        "read must open the file it reads (the test sees every open by name)"
    )
    on_the_loop = opened_on_this_thread(opens, workspace)
    assert not on_the_loop, (
        "invariant: read opens and reads the file in a worker thread (threads.in_thread), "
        "never on the event loop's thread: a slow disk or a huge file would stop every "
        "other task of the loop, and the call's own abort, until the scan ends. Opened on "
        f"the loop's thread: {on_the_loop}"
    )


@pytest.mark.parametrize(
    ("path", "named"),
    [("a\0b.txt", "NUL"), ("\udc80.txt", "surrogate")],
    ids=["nul", "lone-surrogate"],
)
def test_a_path_no_system_call_can_take_is_an_error_result(
    workspace: Path, path: str, named: str
) -> None:
    out = call_now(tools(workspace), "read", path=path)
    assert out.is_error and named in text_of(out), (
        f"invariant: no exception escapes a tool. A path with a {named} is no file name the "
        "system can take: resolve_path (given) raises PathError for it, and read returns "
        f"that as an error result naming the problem. Got: {text_of(out)!r}"
    )


def test_read_still_reads_when_no_thread_can_be_started(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "f.txt").write_text("one\ntwo\n")
    out = call_without_threads(monkeypatch, tools(workspace), "read", path="f.txt")
    assert text_of(out) == numbered(["one", "two"]) and not out.is_error, (
        "when no thread can be started, read still reads: open and read the file through "
        f"threads.in_thread, which runs the scan right there then. Got: {text_of(out)!r}"
    )


@pytest.mark.parametrize(
    ("offset", "limit", "budget", "shown"),
    [
        (4, None, 48_000, (4, 6)),
        (1, 2, 48_000, (1, 2)),
        (1, None, 145, (1, 1)),
        (1, None, 160, (1, 2)),
    ],
    ids=["before-the-window", "past-the-limit", "past-the-budget", "fits-only-without-the-notice"],
)
def test_a_line_outside_the_window_need_not_be_utf8(
    workspace: Path, offset: int, limit: int | None, budget: int, shown: tuple[int, int]
) -> None:
    # Line 3 is not UTF-8. With numbers, lines 1-3 take 8 + 40 + 1 + 8 + 40 + 1 + 8 + 40 =
    # 146 bytes, one more than 145: line 3 does not fit, whatever the notice. With 160 it
    # fits alone, but not with the notice that must follow it (lines 1-2 and theirs take
    # 147 bytes): the window is lines 1-2, and line 3 is never decoded.
    raw = [b"x" * 40] * 2 + [b"\xff" + b"x" * 39] + [b"y" * 40] * 3
    (workspace / "f.txt").write_bytes(b"\n".join(raw) + b"\n")
    first, last = shown
    expected = numbered([raw[n - 1].decode() for n in range(first, last + 1)], first)
    if last < len(raw):
        notice = f"[Showing lines {first}-{last} of {len(raw)}; continue with offset={last + 1}]"
        expected += f"\n\n{notice}"
    out = call_now(
        tools(workspace, max_read_bytes=budget), "read", path="f.txt", offset=offset, limit=limit
    )
    assert text_of(out) == expected, (
        f"line 3 is not UTF-8, but the window is lines {first}-{last}: decode a line only "
        "once it is in the window. Lines before it are only counted, and a line past the "
        "limit or one that does not fit the budget is never decoded (the bytes kept of it "
        f"may end inside a character). Got: {text_of(out)!r}"
    )


def test_any_other_os_error_is_worded_by_describe_os_error(workspace: Path) -> None:
    (workspace / "f.txt").write_text("a file, not a directory\n")
    out = call_now(tools(workspace), "read", path="f.txt/inner.txt")
    error = NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
    assert out.is_error and text_of(out) == describe_os_error(
        "f.txt/inner.txt", error, action="read"
    ), (
        "an OSError while opening or reading is an error result worded by "
        "describe_os_error(path, error, action='read') (here a parent of the path is a "
        f"file), got: {text_of(out)!r}"
    )


@pytest.mark.challenge
def test_a_window_of_a_huge_file_uses_memory_bounded_by_the_window(workspace: Path) -> None:
    path = workspace / "huge.log"
    block = b"".join(b"%07d " % n + b"y" * 92 + b"\n" for n in range(10_000))  # 1 MB
    with open(path, "wb") as file:
        for _ in range(64):  # 64 MB, 640,000 lines: four times the memory a read may use
            file.write(block)
    (first, last), peak = reads_with_peak(tools(workspace), "huge.log", None, 639_900)
    assert first.details.lines == 640_000 and last.details.end_line == 640_000
    assert text_of(last).startswith("639900│ "), "the last window must start at its offset"
    assert peak < 16 * 2**20, (
        f"reading a window of a 64 MB file allocated {peak / 2**20:.0f} MiB at peak: stream it "
        "in chunks instead of loading the file"
    )


@pytest.fixture
def settled_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock a minute ahead: every file looks settled (last changed a minute ago) to a
    racy-timestamp rule, so an implementation that remembers line positions of a file does
    remember them here, and the next read uses them."""
    real_ns, real = time.time_ns, time.time
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() + 60 * 10**9)
    monkeypatch.setattr(time, "time", lambda: real() + 60)


def test_a_file_changed_between_reads_is_read_afresh(workspace: Path, settled_clock: None) -> None:
    # Several MB, so that an implementation that remembers line positions would use them.
    path = workspace / "log.txt"
    lines = [f"{n:07d} " + "a" * 60 for n in range(60_000)]
    path.write_text("\n".join(lines) + "\n")
    registry = tools(workspace)
    before = call_now(registry, "read", path="log.txt", offset=59_990)
    assert before.details.lines == 60_000
    times = os.stat(path)
    data = bytearray(path.read_bytes())
    for at in range(100, len(data) // 2, 997):  # same size, different line breaks
        data[at] = ord("\n")
    with open(path, "r+b") as file:  # in place: same inode, same size
        file.write(data)
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))  # and the old mtime
    expected = bytes(data).decode().split("\n")[:-1]
    after = call_now(registry, "read", path="log.txt", offset=len(expected) - 5)
    assert after.details.lines == len(expected), (
        "a file rewritten between two reads (same inode, size and mtime) must be counted "
        "again, not from memory: remember nothing, or trust it only while the file is "
        "provably unchanged"
    )
    assert text_of(after).split("\n")[0] == f"{len(expected) - 5:>4}│ {expected[-6]}"


def test_a_remembered_file_shows_the_right_lines_at_every_offset(
    workspace: Path, settled_clock: None
) -> None:
    # 1.25 MiB of 101-byte lines after an empty one, more than one chunk of any usual size.
    # The first read scans it all (whatever is remembered from that scan). Then a window
    # starts at each line that holds a multiple of 8 KiB, where a chunked scan keeps its
    # checkpoints (the 8192-byte sniff, 64 KiB or 1 MiB chunks), and at the line after it.
    # The width is odd, so these bytes fall on every place in a line in turn, its newline
    # included. A few hundred reads, with three limits and budgets in turn: cheap for any
    # implementation, and each must show exactly what a fresh count shows.
    path = workspace / "log.txt"
    lines = [""] + [f"{n:07d} ".ljust(100, "b") for n in range(2, (5 << 18) // 101)]
    path.write_text("\n".join(lines) + "\n")
    starts = [0, *itertools.accumulate(len(line) + 1 for line in lines)]
    first = call_now(tools(workspace), "read", path="log.txt", offset=len(lines))
    assert first.details.lines == len(lines)
    holding = {bisect.bisect_right(starts, byte) for byte in range(0, starts[-1], 8192)}
    offsets = {1, 2, len(lines)} | {n + step for n in holding for step in (0, 1)}
    windows = [(2, 48_000), (1, 48_000), (5, 300)]  # (limit, max_read_bytes)
    registries = {budget: tools(workspace, max_read_bytes=budget) for _, budget in windows}
    for turn, offset in enumerate(sorted(o for o in offsets if o <= len(lines))):
        limit, budget = windows[turn % len(windows)]
        out = call_now(registries[budget], "read", path="log.txt", offset=offset, limit=limit)
        assert (text_of(out), out.details) == fresh_read(path, lines, offset, limit, budget), (
            f"reading log.txt again at offset={offset} (limit={limit}, max_read_bytes="
            f"{budget}) showed something else than a fresh count would: what is remembered "
            "of a file must lead to the same text and details (lines, bytes, end_line) at "
            f"every offset. Got: {text_of(out)[:300]!r} with {out.details}"
        )


# An mtime set back right after a change (touch -d, tar -x, cp -p, rsync -t: here to 2001):
# only the status-change time (ctime), which nothing sets back, still says when it changed.
_SET_BACK = "the mtime was set back to 2001 (os.utime, as touch -d or tar -x do) right after it"


def after_the_last_byte(
    monkeypatch: pytest.MonkeyPatch, path: Path, then: Callable[[], None]
) -> None:
    """Call ``then()`` each time a read of ``path`` through os.read or os.pread has returned
    its last byte (or nothing, at its end): a scan read another way is not seen."""
    inode, size = path.stat().st_ino, path.stat().st_size

    def spy(real: Callable[..., bytes], positioned: bool) -> Callable[..., bytes]:
        def read(fd: int, *args: Any) -> bytes:
            data = real(fd, *args)
            with contextlib.suppress(OSError):
                if os.fstat(fd).st_ino == inode:
                    end = args[1] + len(data) if positioned else os.lseek(fd, 0, os.SEEK_CUR)
                    if not data or end >= size:
                        then()
            return data

        return read

    monkeypatch.setattr(os, "read", spy(os.read, False))
    monkeypatch.setattr(os, "pread", spy(os.pread, True))


@pytest.mark.parametrize(
    ("later_ns", "set_back", "next_read_ns", "scan_ends_ns"),
    [
        (0, False, 0, 0),
        (1_000, False, 0, 0),
        (0, True, 0, 0),
        (0, False, 60 * 10**9, 0),
        (0, False, 0, 60 * 10**9),
    ],
    ids=[
        "at-the-change",
        "1us-after",
        "mtime-set-back",
        "next-read-a-minute-later",
        "scan-ends-a-minute-later",
    ],
)
def test_a_file_changed_as_its_read_starts_is_not_remembered(
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    later_ns: int,
    set_back: bool,
    next_read_ns: int,
    scan_ends_ns: int,
) -> None:
    # A file can change again within the timestamp tick of its last change and keep its
    # size and times. Writing through a shared memory map to pages already written does
    # the same (on Linux the times change only when a clean page is first written). The
    # clock here reads the moment of the file's last change, or 1 microsecond later (far
    # less than any timestamp tick): nothing read of it now may be trusted later, since the
    # next change may leave no trace in os.stat. "next-read-a-minute-later": the next read
    # comes when the file looks settled, which says nothing of what the first read saw.
    # "scan-ends-a-minute-later": the file looks settled by the time the scan has ended,
    # which says nothing of the bytes it read when the read started.
    path = workspace / "log.txt"
    lines = [f"{n:07d} ".ljust(99, "c") for n in range(1, (5 << 18) // 100)]
    path.write_text("\n".join(lines) + "\n")
    with open(path, "r+b") as file, mmap.mmap(file.fileno(), 0) as mapped:
        for at in range(0, len(mapped), mmap.PAGESIZE):
            mapped[at] = mapped[at]  # every page written once: later writes change no time
        if set_back:
            os.utime(path, ns=(10**18, 10**18))  # the ctime is now
        status = os.stat(path)
        stamp = max(status.st_mtime_ns, status.st_ctime_ns)
        clock = [stamp + later_ns]
        monkeypatch.setattr(time, "time_ns", lambda: clock[0])
        monkeypatch.setattr(time, "time", lambda: clock[0] / 10**9)
        if scan_ends_ns:  # the scan takes long: the clock has moved on once it has read all
            after_the_last_byte(
                monkeypatch, path, lambda: clock.__setitem__(0, stamp + scan_ends_ns)
            )
        registry = tools(workspace)
        before = call_now(registry, "read", path="log.txt", offset=len(lines))
        assert before.details.lines == len(lines)
        for at in range(50, len(mapped) // 2, 1000):
            mapped[at] = ord("\n")  # more lines, the same size
        now = mapped[:].decode().split("\n")[:-1]
        offset = len(now) - 5
        if next_read_ns:
            clock[0] = stamp + next_read_ns
        after = call_now(registry, "read", path="log.txt", offset=offset, limit=2)
    assert (text_of(after), after.details) == fresh_read(path, now, offset, 2, 48_000), (
        f"log.txt changed right after a read that started {later_ns} ns after its last "
        f"change{'; ' + _SET_BACK if set_back else ''} (the test sets time.time_ns and "
        "time.time), and the change left its size and times as they were: the next read "
        "must count it afresh. Remember nothing of a file changed less than a timestamp "
        "tick before the read started (git's racy-timestamp rule: a margin of a tick, not "
        "only a strict comparison of the times), judged by st_mtime_ns and st_ctime_ns, the "
        "later of the two (an mtime can be set back, a ctime cannot), or remember nothing at "
        "all; judge it by the time the read started, before its first byte (not when the "
        "scan ends), and when you remember, not when you look up (a read a minute later "
        "finds the file settled, but what the first read saw may already be stale). Got: "
        f"{text_of(after)[:200]!r} with {after.details}"
    )


FIFO_WAIT = (
    "read waited for a writer on a FIFO: open with O_NONBLOCK and refuse what os.fstat says is "
    "not a regular file (stat.S_ISREG), before reading a byte"
)


def read_or_release(
    workspace: Path, path: str, release: Callable[[], object], failure: str
) -> ToolOutput:
    """Read ``path``; if the call is still running after 5 s, ``release`` what it waits on
    until it ends, then fail with ``failure``."""

    async def reading() -> ToolOutput:
        task = asyncio.ensure_future(call(tools(workspace), "read", {"path": path}))
        return await end_or_release(task, release, within=5, failure=failure)

    return run(reading(), timeout=30)


def test_a_fifo_is_refused_without_waiting_for_a_writer(workspace: Path) -> None:
    fifo = workspace / "pipe"
    os.mkfifo(fifo)

    out = read_or_release(
        workspace,
        "pipe",
        lambda: play_fifo_writer(fifo),
        FIFO_WAIT,
    )
    assert out.is_error and "not a regular file" in text_of(out), (
        "a FIFO is not a file to read: the error must say 'not a regular file', got: "
        f"{text_of(out)!r}"
    )


def test_a_fifo_holding_nul_bytes_is_refused_before_a_byte_is_read(workspace: Path) -> None:
    # Like /dev/zero, a FIFO with bytes waiting is no file to read; unlike /dev/zero, a read
    # that reads it anyway ends once the test closes the writing end.
    fifo = workspace / "spool"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = [os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)]
    os.write(writer[0], b"\x00" * 64 + b"\n")
    os.close(reader)  # the bytes stay in the FIFO while the writing end is open

    def close_writer() -> None:
        if writer:
            os.close(writer.pop())

    try:
        out = read_or_release(
            workspace,
            "spool",
            close_writer,
            "read waited on a FIFO: open with O_NONBLOCK and refuse what os.fstat says is not "
            "a regular file (stat.S_ISREG), before reading a byte",
        )
    finally:
        close_writer()
    assert out.is_error and "not a regular file" in text_of(out), (
        "invariant: what os.fstat says is not a regular file is refused before a byte is "
        "read, whatever its bytes are: this FIFO holds NUL bytes, and a sniff for binary "
        "content before the S_ISREG check calls it 'binary' (and reads /dev/zero, say). "
        f"Check S_ISREG right after fstat. Got: {text_of(out)!r}"
    )


def make_socket(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return socket_target(workspace, None, monkeypatch)[1]


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda workspace, monkeypatch: os.devnull, "a device like /dev/zero never ends"),
        (make_socket, "a socket cannot even be opened: os.open fails (ENXIO), so os.stat it"),
    ],
    ids=["device", "socket"],
)
def test_a_device_or_a_socket_is_refused(
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Path, pytest.MonkeyPatch], str],
    why: str,
) -> None:
    path = make(workspace, monkeypatch)
    out = call_now(tools(workspace), "read", path=path)
    assert out.is_error and "not a regular file" in text_of(out), (
        f"{path} is not a file to read ({why}): the error must say 'not a regular file', "
        f"got: {text_of(out)!r}"
    )


@pytest.mark.challenge
def test_an_abort_during_the_scan_ends_the_read(workspace: Path) -> None:
    path = workspace / "sparse.log"
    with open(path, "wb") as file:  # text, then a hole of zeros: cheap on disk, slow to scan
        file.write(b"a line of text\n" * 1000)
        file.truncate(64 * 2**20)

    # The person presses stop right after read first looked at the signal: the scan of
    # 64 MiB has started, or is about to.
    out = run(call(tools(workspace), "read", {"path": "sparse.log"}, signal=AbortsOnceLookedAt()))
    assert out.is_error and "aborted" in text_of(out), (
        "an abort while read scans a large file must end the read with an error saying "
        "'aborted': check the signal between chunks"
    )
    controller = AbortController()
    controller.abort()
    early = run(call(tools(workspace), "read", {"path": "sparse.log"}, signal=controller.signal))
    assert early.is_error and "aborted" in text_of(early), (
        "a read whose signal is already aborted must end at once with an error saying 'aborted'"
    )
    for result in (out, early):
        said = text_of(result)
        assert "sparse.log" in said and str(workspace) not in said, (
            "invariant: an error about the file names it as path gave it (here 'sparse.log', "
            "never the absolute path it resolved to), an abort too: the model may have "
            f"several reads under way; got: {said!r}"
        )


def on_each_read(monkeypatch: pytest.MonkeyPatch, before_read: Callable[[int], None]) -> None:
    """Call ``before_read(fd)`` before every read through os.read (or pread, readv,
    preadv): a scan that reads another way is not seen."""

    def spy(real: Callable[..., Any]) -> Callable[..., Any]:
        def read(fd: int, *args: Any, **kwargs: Any) -> Any:
            before_read(fd)
            return real(fd, *args, **kwargs)

        return read

    for name in ("read", "pread", "readv", "preadv"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, spy(getattr(os, name)))


@pytest.mark.challenge
def test_an_abort_between_chunks_ends_the_scan_before_the_next_one(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = workspace / "sparse.log"
    with open(path, "wb") as file:  # text, then a hole of zeros: 64 chunks of 1 MiB or more
        file.write(b"a line of text\n" * 1000)
        file.truncate(64 * 2**20)
    inode = path.stat().st_ino
    controller = AbortController()
    reads = {"before": 0, "after": 0}  # reads of this file, before and after the abort

    # The person presses stop while the third read of the file is under way: reads through
    # os.read (or pread, readv, preadv) are counted, so a scan that reads another way is not
    # checked here; the abort before or at the first chunk is the test above.
    def before_read(fd: int) -> None:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_ino == inode:
                reads["after" if controller.signal.aborted else "before"] += 1
                if reads["before"] == 3 and not controller.signal.aborted:
                    controller.abort("user pressed stop")

    on_each_read(monkeypatch, before_read)
    out = run(call(tools(workspace), "read", {"path": "sparse.log"}, signal=controller.signal))
    if reads["before"] >= 3:
        assert out.is_error and "aborted" in text_of(out) and reads["after"] <= 1, (
            "invariant: an abort during the scan ends it before the next chunk: check the "
            "signal (or the flag its listener sets) before every chunk, not only the first. "
            f"It read {reads['after']} more chunk(s) after the abort and returned: "
            f"{text_of(out)[:200]!r}"
        )


@pytest.mark.challenge
def test_an_abort_of_one_read_leaves_another_read_scanning(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = 3 * 2**19  # 3 MiB of short lines: each scan reads several chunks
    for name in ("kept.log", "stopped.log"):
        (workspace / name).write_bytes(b"x\n" * lines)
    names = {(workspace / name).stat().st_ino: name for name in ("kept.log", "stopped.log")}
    reads = {"kept.log": 0, "stopped.log": 0}
    kept_settled = threading.Event()  # the kept read is in the middle of its scan, or done
    stopped_done = threading.Event()  # the stopped read has returned
    controller = AbortController()

    # The kept read pauses at its second read of the file; meanwhile the other read is
    # aborted at its own second read and returns. Reads through os.read (or pread, readv,
    # preadv) are seen; a scan that reads another way is not checked here.
    def before_read(fd: int) -> None:
        name = None
        with contextlib.suppress(OSError):
            name = names.get(os.fstat(fd).st_ino)
        if name is not None:
            reads[name] += 1
            if name == "kept.log" and reads[name] == 2:
                kept_settled.set()
                stopped_done.wait(10)
            elif name == "stopped.log" and reads[name] == 2:
                controller.abort("user pressed stop")

    on_each_read(monkeypatch, before_read)

    async def both() -> tuple[ToolOutput, ToolOutput]:
        registry = tools(workspace)
        kept = asyncio.create_task(call(registry, "read", {"path": "kept.log"}))
        kept.add_done_callback(lambda _: kept_settled.set())
        await asyncio.to_thread(kept_settled.wait, 10)
        try:
            stopped = await call(
                registry, "read", {"path": "stopped.log"}, signal=controller.signal
            )
        finally:
            stopped_done.set()
        return await kept, stopped

    kept, stopped = run(both())
    details = kept.details
    assert not kept.is_error and isinstance(details, ReadDetails) and details.lines == lines, (
        "invariant: an abort stops the read it was given to, and no other: keep the stop "
        "flag per call (a new threading.Event in each read), never one flag for every "
        f"read. The other read, aborted while this one scanned, left it: {text_of(kept)[:200]!r}"
    )
    if reads["stopped.log"] >= 2:
        assert stopped.is_error and "aborted" in text_of(stopped), text_of(stopped)[:200]


class ListenerCount(AbortSignal):
    """A signal that counts the listeners added to it and still in place."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0

    def add_listener(self, callback: Callable[[], object]) -> Callable[[], None]:
        remove = super().add_listener(callback)
        self.active += 1
        removed = False

        def counted_remove() -> None:
            nonlocal removed
            if not removed:
                removed = True
                self.active -= 1
            remove()

        return counted_remove


@pytest.mark.parametrize(
    ("path", "offset", "budget"),
    [
        ("f.txt", 1, 48_000),
        ("missing.txt", 1, 48_000),
        ("binary.bin", 1, 48_000),
        ("f.txt", 9, 48_000),
        ("f.txt", 1, 5),
        ("latin1.txt", 1, 48_000),
        ("a\0b", 1, 48_000),
        ("x\udcff", 1, 48_000),
    ],
    ids=[
        "success",
        "error",
        "binary",
        "offset-beyond",
        "too-small",
        "not-utf8",
        "nul-in-path",
        "surrogate-in-path",
    ],
)
def test_a_read_leaves_no_listener_on_the_signal(
    workspace: Path, path: str, offset: int, budget: int
) -> None:
    (workspace / "f.txt").write_text("one\ntwo\n")
    (workspace / "binary.bin").write_bytes(b"\x7fELF\x00\x01")
    (workspace / "latin1.txt").write_bytes(b"caf\xe9\n")
    signal = ListenerCount()
    arguments = {"path": path, "offset": offset}
    # A path resolve_path refuses too: the read ends before any file is opened.
    out = run(call(tools(workspace, max_read_bytes=budget), "read", arguments, signal=signal))
    assert out.is_error == ((path, offset, budget) != ("f.txt", 1, 48_000)), text_of(out)
    assert signal.active == 0, (
        "invariant: a call leaves nothing behind on its signal: one signal serves a whole "
        "turn, so a listener you add (signal.add_listener) must be removed (call the "
        f"function it returned) before read returns, on every path. Left: {signal.active}"
    )


@pytest.mark.parametrize(
    ("kind", "offset", "budget"),
    [
        ("directory", 1, 48_000),
        ("fifo", 1, 48_000),
        ("device", 1, 48_000),
        ("text", 1, 48_000),
        ("binary", 1, 48_000),
        ("latin1", 1, 48_000),
        ("text", 9, 48_000),
        ("text", 1, 5),
        ("aborted", 1, 48_000),
    ],
    ids=[
        "directory",
        "fifo",
        "device",
        "success",
        "binary",
        "not-utf8",
        "offset-beyond",
        "too-small",
        "aborted-while-scanning",
    ],
)
def test_a_read_closes_every_descriptor_it_opened(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, kind: str, offset: int, budget: int
) -> None:
    path = {"device": os.devnull}.get(kind, kind)
    if kind == "directory":
        (workspace / path).mkdir()
    elif kind == "fifo":
        os.mkfifo(workspace / path)
    elif kind != "device":
        content = {"binary": b"\x7fELF\x00\x01", "latin1": b"caf\xe9\n"}.get(kind, b"a\nb\n")
        (workspace / path).write_bytes(content)
    target = workspace / path
    before = descriptors_on(monkeypatch, target)
    if kind == "aborted":  # the person presses stop right after read's first look
        arguments = {"path": path, "offset": offset}
        signal = AbortsOnceLookedAt()
        out = run(call(tools(workspace, max_read_bytes=budget), "read", arguments, signal=signal))
        assert "aborted" in text_of(out), text_of(out)
    elif kind == "fifo":  # a read that waits for a writer is released, and fails as such
        out = read_or_release(workspace, path, lambda: play_fifo_writer(target), FIFO_WAIT)
    else:
        out = call_now(tools(workspace, max_read_bytes=budget), "read", path=path, offset=offset)
    assert out.is_error == ((kind, offset, budget) != ("text", 1, 48_000)), text_of(out)
    left = descriptors_on(monkeypatch, target) - before
    assert not left, (
        "invariant: nothing left behind: read closes the descriptor it opened on every path, "
        "also when it refuses the file after fstat (a directory, a FIFO, a device), a "
        "check of its content or an abort during the scan (close it in a `finally`); a "
        f"descriptor from os.open is never closed for you. Still open on {path}: {sorted(left)}"
    )


def test_reads_that_remember_the_file_close_their_descriptors_too(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, settled_clock: None
) -> None:
    # The file looks settled, so whatever a read remembers of it may be used by the next:
    # every read closes what it opened, also one that ends early on what it remembers.
    path = workspace / "long.txt"
    path.write_bytes(b"".join(b"line %d\n" % n for n in range(1, 5001)))
    before = descriptors_on(monkeypatch, path)
    registry = tools(workspace)
    for offset in (1, 2, 4000, 1, 4000):
        out = call_now(registry, "read", path="long.txt", offset=offset, limit=3)
        assert not out.is_error and f"line {offset}" in text_of(out), text_of(out)
    left = descriptors_on(monkeypatch, path) - before
    assert not left, (
        "invariant: every read closes the descriptor it opened, also one that returns early "
        "because it remembers the rest of the file (close it in a `finally`). Still open on "
        f"long.txt after five reads: {sorted(left)}"
    )
