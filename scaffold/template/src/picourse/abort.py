"""Cooperative cancellation: one controller aborts, every holder of its signal hears it.

Modelled on the web's AbortController: a listener added after the abort runs at once,
so nobody can miss it by subscribing late.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

Listener = Callable[[], object]


class AbortError(Exception):
    """Raised by :meth:`AbortSignal.raise_if_aborted`."""


class AbortSignal:
    def __init__(self) -> None:
        self._aborted = False
        self._reason: Any = None
        self._listeners: list[Listener] = []

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> Any:
        return self._reason

    def add_listener(self, callback: Listener) -> Callable[[], None]:
        """Call ``callback()`` once on abort (at once if already aborted); returns remove()."""
        if self._aborted:
            callback()
            return _noop
        self._listeners.append(callback)

        def remove() -> None:
            # Idempotent: cleanup code may call it on several paths.
            if callback in self._listeners:
                self._listeners.remove(callback)

        return remove

    async def wait(self) -> Any:
        """Return the reason once the signal is aborted."""
        if self._aborted:
            return self._reason
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        remove = self.add_listener(wake)
        try:
            await woken
        finally:
            remove()
        return self._reason

    def raise_if_aborted(self) -> None:
        if self._aborted:
            raise AbortError(f"aborted: {self._reason}" if self._reason is not None else "aborted")

    def _abort(self, reason: Any) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        listeners, self._listeners = self._listeners, []
        errors: list[Exception] = []
        for listener in listeners:
            # One failing listener must not keep the others from hearing the abort.
            try:
                listener()
            except Exception as error:  # noqa: BLE001 - re-raised as a group below
                errors.append(error)
        if errors:
            raise ExceptionGroup("abort listeners failed", errors)


class AbortController:
    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        """Abort the signal; a second call changes nothing (the first reason stays)."""
        self.signal._abort(reason)


def _noop() -> None:
    return None
