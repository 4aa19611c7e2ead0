"""Submissions are unpacked safely, only lab modules are taken, and the scan flags tricks."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from coursekit import load_lab
from coursekit.layout import solution_root
from grader import GradeOptions, _tree, grade_submissions
from grader._intake import InvalidSubmission, Submission, discover, lab_modules, survey, take
from grader._scan import scan, suspicious
from tests.grader.graded_class import gradebook, solved_modules

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


SECRET = b"TOP SECRET: what this student cannot read\n"


@pytest.mark.parametrize("swapped", ["src", "read.py"])
def test_a_name_swapped_for_a_link_while_it_is_read_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped: str
) -> None:
    """The student's folder can change while the grader (often root) reads it: a folder or
    module looked at as real and then exchanged for a link (renameat2 does it in one step)
    must not be read through. The swap happens exactly between the look and the open."""
    secret = tmp_path / "secret"
    (secret / "src" / "picourse" / "coding_tools").mkdir(parents=True)
    (secret / READ).write_bytes(SECRET)
    student = tmp_path / "subs" / "mallory"
    (student / READ).parent.mkdir(parents=True)
    (student / READ).write_bytes(b"# the student's own read\n")
    real_open = os.open
    swaps: list[Path] = []

    def open_after_a_swap(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == swapped and kwargs.get("dir_fd") is not None and not swaps:
            place = student / ("src" if swapped == "src" else READ)
            place.rename(place.with_name(place.name + ".moved"))
            place.symlink_to(secret / ("src" if swapped == "src" else READ))
            swaps.append(place)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_after_a_swap)
    scratch = tmp_path / "s"
    scratch.mkdir()
    (submission,) = discover(tmp_path / "subs")
    with pytest.raises(InvalidSubmission, match="symbolic link") as refused:
        lab_modules(submission, LAB, scratch)
    assert swaps, "the spy never saw the grader open the swapped name"
    assert "TOP SECRET" not in str(refused.value)
    with pytest.raises(InvalidSubmission, match="symbolic link"):
        submission.digest()


def test_only_a_trusted_link_leads_to_a_submission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instructor may link a submission in; a link its student made on the way (the
    student's folder replaced by a link to a classmate's) is never followed."""
    classmate = tmp_path / "classmate"
    (classmate / READ).parent.mkdir(parents=True)
    (classmate / READ).write_bytes(SECRET)
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "mallory").symlink_to(classmate)
    scratch = tmp_path / "s"
    scratch.mkdir()
    (submission,) = discover(subs)
    # Made by the grader's user (as in every test): the instructor's link, followed.
    assert lab_modules(submission, LAB, scratch) == {READ: SECRET}
    # The same link made by anyone else (as if by the student): refused.
    monkeypatch.setattr(_tree, "_trusted_owners", lambda source: {os.geteuid() + 1})
    with pytest.raises(InvalidSubmission, match="symbolic link its student could change"):
        lab_modules(submission, LAB, tmp_path / "s2")
    with pytest.raises(InvalidSubmission, match="symbolic link its student could change"):
        submission.digest()


def test_links_in_folders_never_read_do_not_refuse_a_submission(tmp_path: Path) -> None:
    # A virtual environment inside the practice directory is full of links; hidden and
    # tool folders are never read, so their links cannot lead the grader anywhere.
    student = tmp_path / "subs" / "ann"
    (student / READ).parent.mkdir(parents=True)
    (student / READ).write_bytes(b"# ann's read\n")
    for tool in (".venv/bin", "venv/bin", "node_modules/.bin"):
        (student / tool).mkdir(parents=True)
        (student / tool / "python").symlink_to("/usr/bin/python3")
    scratch = tmp_path / "s"
    scratch.mkdir()
    (submission,) = discover(tmp_path / "subs")
    assert lab_modules(submission, LAB, scratch) == {READ: b"# ann's read\n"}


def test_a_module_that_is_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    student = tmp_path / "subs" / "ann"
    (student / READ).parent.mkdir(parents=True)
    os.mkfifo(student / READ)  # opened for reading, it would wait for a writer forever
    scratch = tmp_path / "s"
    scratch.mkdir()
    (submission,) = discover(tmp_path / "subs")
    with pytest.raises(InvalidSubmission, match=r"read\.py is not a regular file"):
        lab_modules(submission, LAB, scratch)
    submission.digest()  # a special file is named in no digest: never read


def test_many_copies_of_the_package_are_refused_not_held_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The walk keeps the bytes of every file that could be a lab module of a practice
    # directory up to three levels down: thousands of copies would be gigabytes.
    monkeypatch.setattr(_tree, "MAX_KEPT_BYTES", 3000)
    student = tmp_path / "subs" / "ann"
    for copy in ("", "a/", "b/", "a/c/"):
        (student / copy / READ).parent.mkdir(parents=True, exist_ok=True)
        (student / copy / READ).write_bytes(b"#" * 1000)
    scratch = tmp_path / "s"
    scratch.mkdir()
    (submission,) = discover(tmp_path / "subs")
    with pytest.raises(InvalidSubmission, match="MiB of lab modules in copies of"):
        lab_modules(submission, LAB, scratch)


def test_who_may_link_a_submission_in(tmp_path: Path) -> None:
    """Trusted: root, the grader's user and the owner of the submissions folder; a link
    anyone else made on the way (a student's) is refused. As root the rule is also tried
    with links owned by other users; a normal user cannot make those."""
    classmate = tmp_path / "classmate"
    (classmate / READ).parent.mkdir(parents=True)
    (classmate / READ).write_bytes(SECRET)
    subs = tmp_path / "subs"
    subs.mkdir()
    entry = subs / "mallory"
    entry.symlink_to(classmate)
    assert _tree._trusted_owners(entry) == {0, os.geteuid(), subs.stat().st_uid}
    if os.geteuid() != 0:
        return
    instructor, student = 1_800_000_001, 1_800_000_002  # uids no one has
    os.chown(subs, instructor, instructor)
    (submission,) = discover(subs)
    for owner, followed in ((instructor, True), (student, False)):
        os.lchown(entry, owner, owner)
        scratch = tmp_path / f"s-{owner}"
        scratch.mkdir()
        if followed:
            assert lab_modules(submission, LAB, scratch) == {READ: SECRET}
        else:
            with pytest.raises(InvalidSubmission, match="its student could change"):
                lab_modules(submission, LAB, scratch)


def test_a_students_link_tells_nothing_of_where_it_leads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The survey used to follow every link to name the kind of entry: behind a student's
    # link, "not a supported archive" / "a broken symbolic link" / graded told a student
    # (as root) whether a path they cannot see exists and what it is.
    subs = tmp_path / "subs"
    subs.mkdir()
    targets = {"a-file": tmp_path / "exists.txt", "a-folder": tmp_path, "nothing": tmp_path / "x"}
    (tmp_path / "exists.txt").write_text("root only")
    for name, target in targets.items():
        (subs / name).symlink_to(target)
    monkeypatch.setattr(_tree, "_trusted_owners", lambda source: {os.geteuid() + 1})
    found, skipped = survey(subs)
    assert found == []
    reasons = {entry.entry: entry.reason for entry in skipped}
    assert set(reasons) == set(targets), "no entry is shown as a folder (name/)"
    assert len({why.replace(name, "NAME") for name, why in reasons.items()}) == 1, reasons
    assert "symbolic link its student could change" in reasons["nothing"]


def test_an_empty_folder_that_changes_what_is_graded_changes_the_digest(tmp_path: Path) -> None:
    # The first practice directory found (sorted) is graded: an empty copy of the package
    # sorted before the real one makes every module a stub. A rerun must see that change.
    student = tmp_path / "subs" / "ann"
    (student / "x" / READ).parent.mkdir(parents=True)
    (student / "x" / READ).write_bytes(b"# ann's read\n")
    (submission,) = discover(tmp_path / "subs")
    scratch = tmp_path / "s"
    scratch.mkdir()
    before = take(submission, LAB, scratch)
    assert before.modules == {READ: b"# ann's read\n"}
    (student / "a" / READ).parent.mkdir(parents=True)
    os.mkfifo(student / "a" / "notes")
    after = take(submission, LAB, scratch)  # a folder is read in place: no scratch used
    assert after.modules == {}, "the empty copy sorts first and is graded"
    assert after.digest != before.digest, "a rerun would keep the old result"
    assert submission.digest() == after.digest


def test_what_a_walk_keeps_is_bounded_by_the_entries_not_their_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Paths of folders and special files were all kept: 40,000 FIFOs at the end of a chain
    # of long folder names took 900 MiB of the grader's memory.
    student = tmp_path / "subs" / "ann"
    (student / READ).parent.mkdir(parents=True)
    (student / READ).write_bytes(b"# ann's read\n")
    deep = student / "/".join(["d" * 50] * 8)
    deep.mkdir(parents=True)
    for n in range(30):
        os.mkfifo(deep / f"fifo-{n}")
        (deep / f"folder-{n}").mkdir()
    tree = _tree.read_tree(student, keep=lambda path: path.endswith("read.py"))
    assert tree.special == set(), "a special file that is no module is never kept"
    assert max(folder.count("/") for folder in tree.folders) <= 5, "deep folders are not kept"
    monkeypatch.setattr(_tree, "MAX_ENTRIES", 50)
    (submission,) = discover(tmp_path / "subs")
    with pytest.raises(InvalidSubmission, match="more than 50 files and folders"):
        submission.digest()


def test_an_archive_is_graded_from_the_bytes_its_digest_covers(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "ada.zip", {READ: b"# ada's read\n"})
    (submission,) = discover(tmp_path)
    scratch = tmp_path / "s"
    scratch.mkdir()
    taken = take(submission, LAB, scratch)
    assert taken.modules == {READ: b"# ada's read\n"}
    assert taken.digest == submission.digest() == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert sorted(p.name for p in scratch.iterdir()) == ["unpacked"], "the copy is removed"


@pytest.mark.parametrize("folder", ["", "lab08/", "a/b/", ".work/", "venv/", "x/.git/"])
def test_what_is_graded_is_what_the_digest_covers(tmp_path: Path, folder: str) -> None:
    """A rerun skips a submission whose digest is unchanged: every module the grader would
    read must be in the digest, or a changed submission keeps its old result."""
    root = tmp_path / "ann"
    module = root / folder / READ
    module.parent.mkdir(parents=True)
    module.write_bytes(b"# ada's read\n")
    scratch = tmp_path / "s"
    scratch.mkdir()
    submission = Submission("ann", root)
    try:
        graded = lab_modules(submission, LAB, scratch)
    except InvalidSubmission as refused:
        assert "not searched" in str(refused), refused
        assert folder.rstrip("/").split("/")[-1] in (".work", "venv", ".git")
        return
    assert graded == {READ: b"# ada's read\n"}
    before = submission.digest()
    module.write_bytes(b"# the stub again\n")
    assert submission.digest() != before, (
        f"a module graded from {folder or './'} is left out of the digest: a rerun would "
        "keep the old result of a changed submission"
    )


def test_a_module_too_deeply_nested_to_parse_is_held_for_review_not_an_error() -> None:
    for deep in (b"x = a" + b".b" * 200_000, b"x = " + b"-" * 200_000 + b"1"):
        reasons = scan({READ: deep}).verdict
        assert any(r.startswith(f"{READ}:") and "too deeply nested" in r for r in reasons)


def test_the_reference_solution_is_not_suspicious() -> None:
    root = solution_root(LAB.root.name)
    modules = {m: (root / m).read_bytes() for m in LAB.lab_modules}
    assert suspicious(modules) == []


@pytest.mark.parametrize(
    ("code", "finding"),
    [
        ("import _pytest.runner", "imports _pytest.runner"),
        ("from grader_plugin import _channel", "imports grader_plugin"),
        ("import sys\nf = sys._getframe(1).f_back", "uses ._getframe"),
        ("import sys\nsys.settrace(print)", "uses .settrace"),
        ("import gc\nfor o in gc.get_objects(): pass", "uses .get_objects"),
        ("import sys\nplugin = sys.modules['grader_plugin']", "names 'grader_plugin'"),
        ("import os\nkey = os.environ.get('GRADER_CHANNEL_KEY')", "names 'grader_channel'"),
        # A coding cookie the scan ignored used to hide the code from it.
        ("# coding: utf-7\n+AGk-mport _pytest.runner", "imports _pytest.runner"),
    ],
)
def test_the_scan_withholds_credit_for_reaching_into_the_test_machinery(
    code: str, finding: str
) -> None:
    reasons = scan({READ: code.encode()}).verdict
    assert any(r.startswith(f"{READ}:") and finding in r for r in reasons), reasons


HONEST = {
    "inspect": "import inspect\nparams = inspect.signature(len).parameters",
    "setattr": "class Box: pass\nbox = Box()\nsetattr(box, 'path', 'a.txt')",
    "gc": "import gc\ngc.collect()",
    "importlib": "import importlib\njson = importlib.import_module('json')",
    "os._exit in a fork child": "import os\nif os.fork() == 0:\n    os._exit(127)",
    "strings": "SKIP = {'conftest.py', 'results.json', 'junit.xml', 'build/solutions/'}",
    "exec": "namespace = {}\nexec('x = 1', namespace)",
    "pytest.main": "if __name__ == '__main__':\n    import pytest\n    pytest.main(['-q'])",
    "latin-1 cookie": "# -*- coding: latin-1 -*-\nNAME = 'caf\xe9'",
}


@pytest.mark.parametrize("variant", sorted(HONEST))
def test_honest_variants_are_noted_for_review_and_never_lose_credit(variant: str) -> None:
    code = HONEST[variant].encode("latin-1")
    found = scan({READ: code})
    assert found.verdict == []
    assert found.notes, "the reviewer still sees what was used"


def test_the_scan_parses_a_cookie_declared_encoding_like_python_does() -> None:
    hidden = b"# coding: utf-7\n+AGk-mport gc\n"
    assert any("imports gc" in note for note in scan({READ: hidden}).notes)
    assert any("declares the source encoding utf-7" in n for n in scan({READ: hidden}).notes)


@pytest.mark.slow
def test_archives_and_bad_archives_are_graded_or_invalid(tmp_path: Path) -> None:
    submissions = tmp_path / "subs"
    submissions.mkdir()
    # Stages 8.1 and 8.2 (35 points): what the archive earns is what its modules earn.
    solved_modules(tmp_path / "zipped" / "lab08", ["8.1", "8.2"])
    shutil.make_archive(str(submissions / "zoe"), "zip", tmp_path / "zipped")
    (submissions / "broken.zip").write_bytes(b"PK\x03\x04 no")
    with zipfile.ZipFile(submissions / "sneaky.zip", "w") as bundle:
        bundle.writestr("../../escape.py", "x")
    out = tmp_path / "out"
    grade_submissions(submissions, out, GradeOptions(jobs=2))
    book = gradebook(out)
    assert (book["zoe"]["status"], float(book["zoe"]["total"])) == ("graded", 35.0), book["zoe"]
    assert book["broken"]["status"] == "invalid" and book["sneaky"]["status"] == "invalid"
    assert not (tmp_path / "escape.py").exists()
