"""What each tool reports besides its text: the fields are part of the course contract."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReadDetails:
    path: str  # cwd joined with the argument (not the symlink-resolved path)
    bytes: int  # the file's size
    lines: int  # the file's total number of lines
    start_line: int  # the offset asked for
    end_line: int  # the last line shown; start_line - 1 when none
    truncated: bool  # lines remain after the window


@dataclass(frozen=True)
class WriteDetails:
    path: str  # cwd joined with the argument, as in ReadDetails (the text names it as given)
    bytes: int  # UTF-8 bytes written


@dataclass(frozen=True)
class EditDetails:
    path: str  # cwd joined with the argument, as in ReadDetails (the text names it as given)
    old_bytes: int
    new_bytes: int
    edits: int  # how many edits of the batch were applied (a replace_all edit counts once)


@dataclass(frozen=True)
class BashDetails:
    command: str
    exit_code: int | None  # None when the process was killed by a signal or never started
    timed_out: bool
    aborted: bool
    truncated: bool


@dataclass(frozen=True)
class ListDetails:
    path: str  # the directory listed: cwd joined with the argument, as in ReadDetails
    entries: int  # how many entries it has (all of them, not only those shown)
    truncated: bool  # some entries were left out


@dataclass(frozen=True)
class GlobDetails:
    pattern: str
    matches: int  # how many paths matched (all of them, not only those shown)
    truncated: bool  # some matches were left out


@dataclass(frozen=True)
class CarefulEdit:
    """What a batch of careful edits (Lab 8.9) produces before anything is written."""

    updated: bytes
    snippet: str  # the edited region, numbered like read


@dataclass(frozen=True)
class Edit:
    """One exact replacement: ``old_text`` must occur exactly once when its turn comes,
    or, with ``replace_all`` (careful edits, Lab 8.9), at least once."""

    old_text: str
    new_text: str
    replace_all: bool = False
