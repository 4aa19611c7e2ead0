"""Prints 16 MB on every call, hundreds of times what the grader keeps of its output."""

import os
import sys


async def read_file(options, path, *, offset=1, limit=None, signal=None):
    block = "spam " * 200_000
    for _ in range(8):
        sys.stdout.write(block)
        os.write(2, block.encode())
    raise NotImplementedError("Lab 8.1 read is not implemented yet")
