"""Watch MutationQueue.run to prove which queue a tool uses, and when its operation starts.
Keep this file as it is: grading uses its own copy."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from picourse.coding_tools import MutationQueue


@dataclass
class QueueProbe:
    calls: list[tuple[MutationQueue, str]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    entered: asyncio.Event | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> QueueProbe:
        real_run = MutationQueue.run
        probe = self

        async def run(
            queue: MutationQueue, key: str, operation: Callable[[], Awaitable[Any]]
        ) -> Any:
            probe.calls.append((queue, key))
            if probe.entered is not None:
                probe.entered.set()

            async def observed() -> Any:
                probe.started.append(key)
                return await operation()

            return await real_run(queue, key, observed)

        monkeypatch.setattr(MutationQueue, "run", run)
        return self
