"""Lab 8.3 (reference): one lane per file, so mutations of one file never interleave.

Each key has a tail: the completion of the last operation queued for it. A new operation
waits for that tail and becomes the new tail. Operations on other keys never wait.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class MutationQueue:
    def __init__(self) -> None:
        # Tails per event loop: a future belongs to one loop, and tests run many loops.
        self._tails: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Future[None]]
        ] = weakref.WeakKeyDictionary()

    async def run(self, key: str, operation: Callable[[], Awaitable[T]]) -> T:
        """Run ``operation`` after every operation queued earlier under ``key``."""
        loop = asyncio.get_running_loop()
        tails = self._tails.setdefault(loop, {})
        previous = tails.get(key)
        mine: asyncio.Future[None] = loop.create_future()
        tails[key] = mine

        def release(_: object = None) -> None:
            if not mine.done():
                mine.set_result(None)
            if tails.get(key) is mine:
                del tails[key]

        try:
            if previous is not None:
                await asyncio.shield(previous)
            return await operation()
        finally:
            # A caller cancelled while waiting must not let the next one overtake the
            # operation still running ahead of it: hand over only once that one is done.
            if previous is not None and not previous.done():
                previous.add_done_callback(release)
            else:
                release()


def canonical_key(path: str) -> str:
    """The queue key of a path: symlinks resolved, so two names of one file share a lane."""
    return os.path.realpath(path)


DEFAULT_MUTATION_QUEUE = MutationQueue()
