"""Allocates memory until something stops it."""


async def read_file(options, path, *, offset=1, limit=None, signal=None):
    hoard = []
    while True:
        hoard.append(bytearray(64 << 20))
