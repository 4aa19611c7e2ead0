"""A Gradescope autograder that runs this same grading code on one submission.

The bundle holds ``setup.sh`` (installs the kit), ``run_autograder`` (grades
``$ROOT/submission`` and writes ``$ROOT/results/results.json``) and the kit itself, without
``solutions/``. ``$ROOT`` is ``/autograder`` on Gradescope; ``GRADER_AUTOGRADER_ROOT``
points it elsewhere to try the bundle locally.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from coursekit.layout import COURSE_ROOT

ROOT_VARIABLE = "GRADER_AUTOGRADER_ROOT"
SHIPPED = ["pyproject.toml", "README.md", "practice.py", "coursekit", "grader", "scaffold", "labs"]

# Ubuntu 24.04's python3 is 3.12; 22.04's is 3.10, too old for the kit (>= 3.11). There the
# deadsnakes PPA provides python3.12: an apt package like the rest of the image, installed
# under /usr where the grader's unprivileged job users can run it (an interpreter under
# /root, as uv or pyenv install for root, is out of their reach), and updated by apt.
SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image (Ubuntu 22.04 or 24.04).
set -euo pipefail
ROOT="${GRADER_AUTOGRADER_ROOT:-/autograder}"
export DEBIAN_FRONTEND=noninteractive

# The first interpreter on PATH that is Python >= 3.11.
recent_python() {
    local candidate version
    for candidate in python3 python3.13 python3.12 python3.11; do
        command -v "$candidate" >/dev/null 2>&1 || continue
        version="$("$candidate" -c 'import sys; print(sys.version_info >= (3, 11))')" || continue
        if [ "$version" = "True" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

apt-get update
apt-get install -y python3 python3-venv bubblewrap libseccomp2
if ! PYTHON="$(recent_python)"; then
    apt-get install -y software-properties-common
    add-apt-repository -y ppa:deadsnakes/ppa
    apt-get update
    apt-get install -y python3.12 python3.12-venv
    if ! PYTHON="$(recent_python)"; then
        echo "setup.sh: no Python >= 3.11 even after installing python3.12 from the" \\
            "deadsnakes PPA; install one (e.g. uv python install 3.12) and rebuild" >&2
        exit 1
    fi
fi
echo "setup.sh: using $PYTHON ($("$PYTHON" --version))"
"$PYTHON" -m venv "$ROOT/venv"
"$ROOT/venv/bin/pip" install "$ROOT/source"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission.
set -euo pipefail
ROOT="${GRADER_AUTOGRADER_ROOT:-/autograder}"
PYTHON="${GRADER_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source"
exec "$PYTHON" -m grader gradescope-run
"""


def build_gradescope_bundle(target: Path) -> Path:
    target = target.absolute()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            bundle.writestr(info, text)
        for entry in SHIPPED:
            path = COURSE_ROOT / entry
            files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            for file in files:
                if "__pycache__" in file.parts or "examples" in file.relative_to(COURSE_ROOT).parts:
                    continue
                bundle.write(file, f"source/{file.relative_to(COURSE_ROOT)}")
    return target


def run_inside_gradescope() -> int:
    """Grade $ROOT/submission and write $ROOT/results/results.json."""
    from grader._grade import GradeOptions, grade_submissions
    from grader._sandbox import SandboxError

    root = Path(os.environ.get(ROOT_VARIABLE, "/autograder"))
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gradescope-") as scratch:
        submissions = Path(scratch) / "submissions"
        submissions.mkdir()
        shutil.copytree(root / "submission", submissions / "submission", symlinks=True)
        out = Path(scratch) / "out"
        try:
            grade_submissions(submissions, out, GradeOptions(jobs=1))
        except SandboxError as error:
            # Gradescope runs each submission in a container of its own, thrown away after
            # it, which usually forbids the namespaces bwrap needs. That container is then
            # the sandbox; the judge still never shares a process with student code, and
            # the result records that no sandbox of the grader's own was used.
            print(f"note: {error}; grading inside Gradescope's container", file=sys.stderr)
            grade_submissions(submissions, out, GradeOptions(jobs=1, sandbox="unsafe-none"))
        report = out / "submissions" / "submission" / "gradescope" / "results.json"
        temp = results / ".results.json.tmp"
        shutil.copyfile(report, temp)
        os.replace(temp, results / "results.json")
    return 0
