"""Lab 8.3 — one lane per file, so mutations of one file never interleave.

``run(key, operation)`` starts ``operation()`` only after every operation queued earlier
under the same key has finished (failed ones too); other keys do not wait. Write and edit
share ``DEFAULT_MUTATION_QUEUE``, keyed by ``canonical_key`` (symlinks resolved).

Cancellation never opens a lane early: a caller cancelled while waiting does not let the
next one overtake the operation still running ahead of it, and a caller cancelled while
its operation runs gets ``CancelledError`` while the operation (shield it) keeps the lane
until it really ends: a worker thread cannot be cancelled, and may still be writing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class MutationQueue:
    def __init__(self) -> None:
        # Lab 8.3: the state the queue needs (what each key is waiting for).
        pass

    async def run(self, key: str, operation: Callable[[], Awaitable[T]]) -> T:
        # Lab 8.3: wait for the key's previous operation, run this one, hand over.
        raise NotImplementedError("Lab 8.3 MutationQueue.run is not implemented yet")


def canonical_key(path: str) -> str:
    # Lab 8.3: two names of one file must give the same key.
    raise NotImplementedError("Lab 8.3 canonical_key is not implemented yet")


DEFAULT_MUTATION_QUEUE = MutationQueue()
