"""Submissions are unpacked safely, only lab modules are taken, and the scan flags tricks."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

from coursekit import load_lab
from coursekit.layout import solution_root
from grader._intake import InvalidSubmission, Submission, discover, lab_modules
from grader._scan import suspicious

LAB = load_lab("08")
READ = "src/picourse/coding_tools/read.py"


def make_zip(path: Path, entries: dict[str, bytes], links: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w") as bundle:
        for name, data in entries.items():
            bundle.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16  # a symbolic link
            bundle.writestr(info, "/etc/passwd")
    return path


def test_a_wrapped_archive_yields_only_the_lab_modules(tmp_path: Path) -> None:
    make_zip(
        tmp_path / "ada.zip",
        {
            f"lab08/{READ}": b"# ada's read\n",
            "lab08/tests/conftest.py": b"# ignored\n",
            "lab08/src/picourse/tool.py": b"# runtime edits are ignored\n",
        },
    )
    (submission,) = discover(tmp_path)
    assert submission.student == "ada"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert lab_modules(submission, LAB, scratch) == {READ: b"# ada's read\n"}


@pytest.mark.parametrize(
    ("entries", "links", "why"),
    [
        ({f"../{READ}": b"x"}, (), "outside"),
        ({f"/abs/{READ}": b"x"}, (), "outside"),
        ({READ: b"x"}, ("src/picourse/coding_tools/edit.py",), "link"),
        ({"README.md": b"no package here"}, (), "no src/picourse/coding_tools"),
    ],
)
def test_a_bad_zip_is_invalid(
    tmp_path: Path, entries: dict[str, bytes], links: tuple[str, ...], why: str
) -> None:
    make_zip(tmp_path / "eve.zip", entries, links)
    scratch = tmp_path / "s"
    scratch.mkdir()
    with pytest.raises(InvalidSubmission, match=why):
        lab_modules(discover(tmp_path)[0], LAB, scratch)


def test_a_tar_with_a_link_or_too_many_entries_is_invalid(tmp_path: Path) -> None:
    with tarfile.open(tmp_path / "mallory.tar.gz", "w:gz") as bundle:
        link = tarfile.TarInfo(READ)
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/shadow"
        bundle.addfile(link)
    scratch = tmp_path / "s"
    scratch.mkdir()
    with pytest.raises(InvalidSubmission, match="link"):
        lab_modules(discover(tmp_path)[0], LAB, scratch)


def test_a_corrupt_archive_is_invalid_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "broken.zip").write_bytes(b"PK\x03\x04 not really a zip")
    scratch = tmp_path / "s"
    scratch.mkdir()
    with pytest.raises(InvalidSubmission, match="cannot unpack"):
        lab_modules(discover(tmp_path)[0], LAB, scratch)


def test_a_zip_bomb_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader import _unpack

    monkeypatch.setattr(_unpack, "MAX_TOTAL_BYTES", 1000)
    make_zip(tmp_path / "bomb.zip", {READ: b"0" * 5000})
    scratch = tmp_path / "s"
    scratch.mkdir()
    with pytest.raises(InvalidSubmission, match="more than 1000 bytes"):
        lab_modules(discover(tmp_path)[0], LAB, scratch)


def test_a_symlinked_module_in_a_directory_is_invalid(tmp_path: Path) -> None:
    package = tmp_path / "subs" / "bob" / "src" / "picourse" / "coding_tools"
    package.mkdir(parents=True)
    (package / "read.py").symlink_to("/etc/hostname")
    scratch = tmp_path / "s"
    scratch.mkdir()
    with pytest.raises(InvalidSubmission, match="symbolic link"):
        lab_modules(Submission("bob", tmp_path / "subs" / "bob"), LAB, scratch)


def test_the_reference_solution_is_not_suspicious() -> None:
    root = solution_root(LAB.root.name)
    modules = {m: (root / m).read_bytes() for m in LAB.lab_modules}
    assert suspicious(modules) == []


@pytest.mark.parametrize(
    ("code", "finding"),
    [
        ("import _pytest.runner", "imports _pytest.runner"),
        ("from grader_plugin import _channel", "imports from grader_plugin"),
        ("import gc", "imports gc"),
        ("import sys\nsys.modules['x'] = 1", "uses .modules"),
        ("import sys\nf = sys._getframe(1).f_back", "uses ._getframe"),
        ("exec(open('x').read())", "calls exec()"),
        ("open('../../solutions/08-coding-tools/x.py')", "mentions 'solutions/'"),
        ("import os\nos._exit(0)", "uses ._exit"),
    ],
)
def test_the_scan_names_what_it_found(code: str, finding: str) -> None:
    reasons = suspicious({READ: code.encode()})
    assert any(r.startswith(f"{READ}:") and finding in r for r in reasons), reasons
