"""Lab 8.3: a per-file lane of mutations (independent version for the similarity tests)."""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import TypeVar

R = TypeVar("R")


class MutationQueue:
    """One asyncio.Lock per key, created on demand and dropped when nobody waits."""

    def __init__(self) -> None:
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}
        self._users: defaultdict[tuple[int, str], int] = defaultdict(int)

    async def run(self, key: str, operation: Callable[[], Awaitable[R]]) -> R:
        slot = (id(asyncio.get_running_loop()), key)
        lock = self._locks.setdefault(slot, asyncio.Lock())
        self._users[slot] += 1
        try:
            async with lock:
                task = asyncio.ensure_future(operation())
                try:
                    return await asyncio.shield(task)
                except asyncio.CancelledError:
                    await asyncio.wait([task])
                    raise
        finally:
            self._users[slot] -= 1
            if self._users[slot] == 0:
                del self._users[slot]
                self._locks.pop(slot, None)


def canonical_key(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


DEFAULT_MUTATION_QUEUE = MutationQueue()
