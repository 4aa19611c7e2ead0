"""The judge's side of the wire: connections to the host, the codec, and proxies.

Calls from one event loop share one connection, so they start in the host in the order
the test made them; a call from synchronous code uses a connection of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import itertools
import socket
import sys
import threading
import weakref
from typing import Any

from .host_process import host, settings
from .needs_host import NeedsHost, for_the_host
from .wire import Codec, Proxy, WireError, is_async, pack, read_frame, recv_frame

_sending: contextvars.ContextVar[tuple[Any, list[Any]] | None] = contextvars.ContextVar(
    "grader_sending", default=None
)


class _JudgeCodec(Codec):
    def __init__(self) -> None:
        super().__init__(lambda m: m.startswith("picourse") and m not in settings.student)
        self.proxies: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self._signals = itertools.count(1)

    def decode(self, data: Any) -> Any:
        if for_the_host.get():  # a part of a value being decoded, or inside a callback
            return super().decode(data)
        token = for_the_host.set(True)
        try:
            return super().decode(data)
        except NeedsHost as refused:
            why = f"the host's answer reaches into the student's code: {refused}"
            raise WireError(why) from None
        finally:
            for_the_host.reset(token)

    def proxy_id(self, value: Any) -> int | None:
        return value._host_id if isinstance(value, RemoteObject) else None

    def make_proxy(self, ref: dict[str, Any]) -> Any:
        number = int(ref["id"])
        proxy = self.proxies.get(number)
        if proxy is None:
            proxy = self.proxies[number] = RemoteObject(number, ref)
        return proxy

    def encode_signal(self, value: Any) -> dict[str, Any] | None:
        from picourse.abort import AbortSignal

        if not isinstance(value, AbortSignal):
            return None
        if type(value) is not AbortSignal or any(callable(v) for v in vars(value).values()):
            # A signal the test made its own (a subclass, a wrapped add_listener) watches
            # how the code under test uses it: only the host's copy would see that.
            raise NeedsHost("the test watches how its abort signal is used")
        number = next(self._signals)
        sending = _sending.get()
        if sending is not None and not value.aborted:
            link, removers = sending
            removers.append(value.add_listener(lambda: link.abort(number, value.reason)))
        reason = value.reason if isinstance(value.reason, (str, int, float)) else None
        return {"t": "signal", "id": number, "aborted": value.aborted, "reason": reason}

    def decode_signal(self, data: dict[str, Any]) -> Any:
        from picourse.abort import AbortController

        controller = AbortController()
        if data.get("aborted"):
            controller.abort(data.get("reason"))
        return controller.signal

    def check_shareable(self, value: Any) -> None:
        module = _owner_module(value)
        tests = sys.modules.get(module)
        in_tests = str(getattr(tests, "__file__", "") or "").startswith(settings.tests)
        if not (in_tests or module.split(".")[0] in ("builtins", "asyncio", "picourse")):
            raise NeedsHost(f"the test hands a {type(value).__name__} of {module} to the tools")
        if in_tests and inspect.isroutine(value) and not is_async(value):
            # The student's code calls it and goes on at once; across processes the test's
            # effect (an abort, say) would arrive after that code had already moved on.
            raise NeedsHost("the test hands the tools a synchronous callback")


def _owner_module(value: Any) -> str:
    if isinstance(value, functools.partial):
        return _owner_module(value.func)
    owner = getattr(value, "__self__", None)
    if inspect.isroutine(value) and owner is not None and not inspect.ismodule(owner):
        value = owner
    if inspect.isroutine(value) or isinstance(value, type):
        return str(getattr(value, "__module__", None) or "builtins")
    return type(value).__module__


codec = _JudgeCodec()


class _Link:
    """One connection for every call made from one event loop."""

    def __init__(self, reader: Any, writer: Any) -> None:
        self.reader, self.writer = reader, writer
        self.loop = asyncio.get_running_loop()
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.numbers = itertools.count(1)
        self.closed = False
        self.callbacks: set[asyncio.Future[None]] = set()
        self.task = asyncio.ensure_future(self._read())

    def abort(self, signal: int, reason: Any) -> None:
        message = {"op": "abort", "sig": signal, "reason": reason}
        try:
            here = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            here = False
        if here:
            # At once, in order: an abort made inside a callback (on_event, say) must reach
            # the host before that callback's reply lets the host's code go on.
            self._write(message)
        else:
            self.loop.call_soon_threadsafe(self._write, message)

    def _write(self, message: dict[str, Any]) -> None:
        if not self.closed:
            self.writer.write(pack(message))

    async def call(self, target: dict[str, Any], args: Any, kwargs: Any) -> Any:
        number = next(self.numbers)
        removers: list[Any] = []
        token = _sending.set((self, removers))
        try:
            message = {"op": "call", "call": number, **target, **_arguments(args, kwargs)}
        finally:
            _sending.reset(token)
        answer = self.pending[number] = self.loop.create_future()
        try:
            if self.closed:
                raise host.gone()
            self._write(message)
            return await answer
        except asyncio.CancelledError:
            self._write({"op": "cancel", "call": number})
            raise
        finally:
            self.pending.pop(number, None)
            for remove in removers:
                remove()

    async def _read(self) -> None:
        try:
            while True:
                message = await read_frame(self.reader)
                if message.get("op") == "callback":
                    task = asyncio.ensure_future(self._callback(message))
                    self.callbacks.add(task)
                    task.add_done_callback(self.callbacks.discard)
                elif message.get("op") == "result":
                    answer = self.pending.get(int(message["call"]))
                    if answer is not None and not answer.done():
                        _settle(answer, message)
        except (asyncio.IncompleteReadError, ConnectionError, WireError, asyncio.CancelledError):
            pass
        finally:
            self.closed = True
            self.writer.close()
            for answer in self.pending.values():
                if not answer.done():
                    answer.set_exception(host.gone())

    async def _callback(self, message: dict[str, Any]) -> None:
        for_the_host.set(True)  # this task's own context: the host asked for this
        try:
            result = _invoke(message)
            if inspect.isawaitable(result):
                result = await result
            reply = {"op": "reply", "cb": message["cb"], "value": codec.encode(result)}
        except BaseException as error:  # noqa: BLE001 - the test's callback failed: tell the host
            reply = {"op": "reply", "cb": message["cb"], "error": codec.encode_error(error)}
        self._write(reply)


def _settle(answer: asyncio.Future[Any], message: dict[str, Any]) -> None:
    """The call's outcome; an answer that cannot be decoded (too deep, too big a number,
    not of this protocol) fails this call only, and says so, not that the host ended."""
    try:
        if message.get("cancelled"):
            answer.set_exception(asyncio.CancelledError())
        elif "error" in message:
            answer.set_exception(codec.decode_error(message["error"]))
        else:
            answer.set_result(codec.decode(message.get("value")))
    except Exception as error:  # noqa: BLE001 - whatever the host sent, this call fails
        if not answer.done():
            answer.set_exception(
                WireError(f"the host's answer cannot be used: {type(error).__name__}: {error}")
            )


def _arguments(args: Any, kwargs: Any) -> dict[str, Any]:
    return {"args": codec.encode(list(args)), "kwargs": codec.encode(dict(kwargs))}


def _invoke(message: dict[str, Any]) -> Any:
    target = codec.own[int(message["ref"])]
    method = message.get("method")
    if method is not None:
        if str(method).startswith("_"):
            raise AttributeError(method)
        target = getattr(target, str(method))
    return target(*codec.decode(message["args"]), **codec.decode(message["kwargs"]))


_links: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future[_Link]] = (
    weakref.WeakKeyDictionary()
)


def _from_the_test_thread() -> None:
    """The host runs every call on its one event loop, in its one thread: a test that calls
    the student's code from another thread (another event loop, as two agents side by side,
    or a worker) would see the calls meet there, ordered or blocked as in no process of its
    own. Such a test runs in the host, where its threads are real."""
    if threading.current_thread() is not threading.main_thread() and not for_the_host.get():
        raise NeedsHost("the test calls the student's code from a thread of its own")


async def call_async(target: dict[str, Any], args: Any, kwargs: Any) -> Any:
    _from_the_test_thread()
    loop = asyncio.get_running_loop()
    pending = _links.get(loop)
    if pending is None:
        address = host.address()
        pending = _links[loop] = loop.create_future()
        try:
            reader, writer = await asyncio.open_unix_connection(address)
            pending.set_result(_Link(reader, writer))
        except OSError:
            del _links[loop]
            pending.set_exception(host.gone())
            pending.exception()
            raise host.gone() from None
    link = await asyncio.shield(pending)
    return await link.call(target, args, kwargs)


def call_sync(target: dict[str, Any], args: Any, kwargs: Any) -> Any:
    _from_the_test_thread()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(host.address())
            sock.sendall(pack({"op": "call", "call": 1, **target, **_arguments(args, kwargs)}))
            while True:
                message = recv_frame(sock)
                if message.get("op") == "result":
                    break
                if message.get("op") == "callback":
                    sock.sendall(pack(_callback_blocking(message)))
        except (OSError, WireError):
            raise host.gone() from None
    if "error" in message:
        raise codec.decode_error(message["error"])
    return codec.decode(message.get("value"))


def _callback_blocking(message: dict[str, Any]) -> dict[str, Any]:
    token = for_the_host.set(True)
    try:
        result = _invoke(message)
        if inspect.isawaitable(result):
            result = _finish(result)
        return {"op": "reply", "cb": message["cb"], "value": codec.encode(result)}
    except BaseException as error:  # noqa: BLE001 - the test's callback failed: tell the host
        return {"op": "reply", "cb": message["cb"], "error": codec.encode_error(error)}
    finally:
        for_the_host.reset(token)


def _finish(awaitable: Any) -> Any:
    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the context goes along
        return pool.submit(contextvars.copy_context().run, asyncio.run, wait()).result()


def remote_function(target: dict[str, Any], is_async: bool, name: str) -> Any:
    async def call_later(*args: Any, **kwargs: Any) -> Any:
        return await call_async(target, args, kwargs)

    def call_now(*args: Any, **kwargs: Any) -> Any:
        return call_sync(target, args, kwargs)

    call = call_later if is_async else call_now
    call.__name__ = call.__qualname__ = name
    return call


class RemoteObject(Proxy):
    """An object of the student's code: its methods run in the host."""

    def __init__(self, number: int, ref: dict[str, Any]) -> None:
        self._host_id = number
        self._kind = str(ref.get("type", "object"))
        self._methods: dict[str, bool] = dict(ref.get("methods", {}))
        self._call = remote_function({"ref": number}, bool(ref.get("async")), self._kind)
        self._callable = bool(ref.get("callable"))
        self._truth = bool(ref.get("truth", True))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._callable:
            raise TypeError(f"'{self._kind}' object is not callable")
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._methods:
            raise AttributeError(f"the student's {self._kind} has no method {name!r}")
        return remote_function({"ref": self._host_id, "method": name}, self._methods[name], name)

    def __repr__(self) -> str:
        return f"<the student's {self._kind}>"
