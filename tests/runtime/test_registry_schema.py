"""The given registry's tool definitions: what the model is offered, by session kind.

These are the runtime's promises, not the student's: the lab tests leave them alone, since
no student code can change them (a lab test of them would pass for anything that builds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from picourse.coding_tools import registry


class _AnyLedger:
    """Stands in for the student's 8.9 ReadLedger, which the schema does not depend on."""


def definitions(workspace: Path, **options: Any) -> dict[str, dict[str, Any]]:
    tools = registry.create_coding_tools(workspace, **options)
    return {d["name"]: d for d in tools.definitions()}


def test_replace_all_is_offered_only_to_careful_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "ReadLedger", _AnyLedger)
    careful = definitions(tmp_path, careful_edits=True)["edit"]["parameters"]["properties"]
    assert "replace_all" in careful["edits"]["items"]["properties"], "each edit of a batch"
    assert "replace_all" in careful, "and the single-edit form"
    plain = definitions(tmp_path)["edit"]
    assert "replace_all" not in str(plain), "the core edit tool keeps its contract schema"
