"""Prints tens of megabytes on every call."""

import os
import sys


async def read_file(options, path, *, offset=1, limit=None, signal=None):
    block = "spam " * 200_000
    for _ in range(50):
        sys.stdout.write(block)
        os.write(2, block.encode())
    raise NotImplementedError("Lab 8.1 read is not implemented yet")
