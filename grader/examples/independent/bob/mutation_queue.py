"""Mutation queue, bob's take: a chain of tasks per path (for the similarity tests)."""

import asyncio
import os


class MutationQueue:
    def __init__(self):
        self.last = {}

    async def run(self, key, operation):
        loop = asyncio.get_running_loop()
        before = self.last.get((loop, key))

        async def chained():
            if before is not None:
                try:
                    await before
                except BaseException:
                    pass
            return await operation()

        current = loop.create_task(chained())
        self.last[(loop, key)] = current

        def forget(done):
            if self.last.get((loop, key)) is done:
                self.last.pop((loop, key), None)

        current.add_done_callback(forget)
        return await asyncio.shield(current)


def canonical_key(path):
    return os.path.realpath(path)


DEFAULT_MUTATION_QUEUE = MutationQueue()
