"""Lab 8.3 (reference): one lane per file, so mutations of one file never interleave.

Each key has a tail: the completion of the last operation queued for it. A new operation
waits for that tail and becomes the new tail. Operations on other keys never wait.

Cancellation never opens a lane early:
- a caller cancelled while it waits hands over only once the operation ahead is done;
- a caller cancelled while its operation runs gets ``CancelledError`` at once, but the
  operation is shielded and keeps the lane until it really ends. An operation usually
  waits for a worker thread, and a thread cannot be cancelled: releasing when the caller
  gives up would let the next operation run while that thread still writes.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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

        if previous is not None:
            try:
                await asyncio.shield(previous)
            except BaseException:
                # Cancelled while waiting: this operation never runs, but the next one
                # must still wait for the one ahead of it.
                previous.add_done_callback(release)
                raise

        async def whole() -> T:
            return await operation()

        running = asyncio.ensure_future(whole())
        running.add_done_callback(_settle)
        running.add_done_callback(release)
        return await asyncio.shield(running)


def _settle(task: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of an operation whose caller may have stopped waiting, so
    its exception is not reported as never retrieved."""
    if not task.cancelled():
        task.exception()


def canonical_key(path: str) -> str:
    """The queue key of a path: symlinks resolved, so two names of one file share a lane."""
    return os.path.realpath(path)


DEFAULT_MUTATION_QUEUE = MutationQueue()
