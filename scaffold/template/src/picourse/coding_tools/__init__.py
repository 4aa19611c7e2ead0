"""Chapter 08: the four tools a coding agent needs (read, write, edit, bash), and the
optional extensions (ls and glob, a confirmation gate, careful edits).

The lab modules, one per stage, are listed in the chapter's ``lab.toml``; everything
else in this package is given and stays as it is.
"""

from picourse.coding_tools.agent import build_system_prompt, run_coding_agent
from picourse.coding_tools.approval import Confirm, ConfirmRequest, approve_all
from picourse.coding_tools.confirm import terminal_confirmer
from picourse.coding_tools.details import (
    BashDetails,
    Edit,
    EditDetails,
    GlobDetails,
    ListDetails,
    ReadDetails,
    WriteDetails,
)
from picourse.coding_tools.errors import ChangeRefused, PathError, WorkspaceEscapeError
from picourse.coding_tools.mutation_queue import DEFAULT_MUTATION_QUEUE, MutationQueue
from picourse.coding_tools.options import CodingToolOptions, Containment
from picourse.coding_tools.registry import create_coding_tools

__all__ = [
    "DEFAULT_MUTATION_QUEUE",
    "BashDetails",
    "ChangeRefused",
    "CodingToolOptions",
    "Confirm",
    "ConfirmRequest",
    "Containment",
    "Edit",
    "EditDetails",
    "GlobDetails",
    "ListDetails",
    "MutationQueue",
    "PathError",
    "ReadDetails",
    "WorkspaceEscapeError",
    "WriteDetails",
    "approve_all",
    "build_system_prompt",
    "create_coding_tools",
    "run_coding_agent",
    "terminal_confirmer",
]
