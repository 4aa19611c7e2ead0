"""Chapter 08: the four tools a coding agent needs (read, write, edit, bash).

The lab modules, one per stage, are listed in the chapter's ``lab.toml``; everything
else in this package is given and stays as it is.
"""

from picourse.coding_tools.agent import build_system_prompt, run_coding_agent
from picourse.coding_tools.details import BashDetails, Edit, EditDetails, ReadDetails, WriteDetails
from picourse.coding_tools.errors import PathError, WorkspaceEscapeError
from picourse.coding_tools.mutation_queue import DEFAULT_MUTATION_QUEUE, MutationQueue
from picourse.coding_tools.options import CodingToolOptions, Containment
from picourse.coding_tools.registry import create_coding_tools

__all__ = [
    "DEFAULT_MUTATION_QUEUE",
    "BashDetails",
    "CodingToolOptions",
    "Containment",
    "Edit",
    "EditDetails",
    "MutationQueue",
    "PathError",
    "ReadDetails",
    "WorkspaceEscapeError",
    "WriteDetails",
    "build_system_prompt",
    "create_coding_tools",
    "run_coding_agent",
]
