"""Prints 2 MB on every call, to stdout and stderr: 30 times what the grader keeps of its
output (the last 64 KiB), hundreds of megabytes in a run."""

import os
import sys


async def read_file(options, path, *, offset=1, limit=None, signal=None):
    block = "spam " * 200_000
    sys.stdout.write(block)
    os.write(2, block.encode())
    raise NotImplementedError("Lab 8.1 read is not implemented yet")
