"""Given: a blocking call run off the event loop, exactly once, whatever the machine allows.

``await in_thread(function, *args)`` runs ``function(*args)`` on a thread of its own and
returns its result (or raises its exception), so the event loop keeps running meanwhile,
as ``asyncio.to_thread`` does. The difference shows when no thread can be started: the
user's process limit (``ulimit -u``) counts threads, and a busy machine reaches it.

- ``asyncio.to_thread`` then raises ``RuntimeError: can't start new thread`` out of the
  tool, and worse, it has already queued the call on the loop's default executor: the
  next thread that does start runs it, after the tool has reported that it failed (a
  write that "failed" lands later, outside the mutation queue).
- ``in_thread`` starts the thread before anything is queued; if it cannot, it runs the
  call right here, blocking the event loop for its duration: slower for the loop, but the
  call happens exactly once and the tool still ends with its own result.

A caller that is cancelled stops waiting; the thread, like ``to_thread``'s, runs on to
the end of its call (a blocking call cannot be interrupted) and its result is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def in_thread(function: Callable[..., T], /, *args: object) -> T:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():  # the caller was cancelled
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result, error = context.run(function, *args), None
        except BaseException as raised:  # noqa: BLE001 - handed to the caller, who re-raises it
            result, error = None, raised
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    thread = threading.Thread(target=work, name=f"in_thread:{_name(function)}")
    try:
        thread.start()
    except RuntimeError:  # no thread to be had: nothing was queued, so do it here
        return function(*args)
    return await done


def _name(function: Callable[..., object]) -> str:
    return getattr(function, "__qualname__", None) or type(function).__name__
