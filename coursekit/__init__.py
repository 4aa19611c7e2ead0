"""The course kit's own machinery: where things are, what a lab holds, how a practice
directory is put together. ``practice.py`` and the grader use it; students never import it.
"""

from coursekit.assemble import assemble_practice_dir
from coursekit.lab import Lab, Mutant, Stage, load_lab
from coursekit.layout import COURSE_ROOT, lab_root

__all__ = [
    "COURSE_ROOT",
    "Lab",
    "Mutant",
    "Stage",
    "assemble_practice_dir",
    "lab_root",
    "load_lab",
]
