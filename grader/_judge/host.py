"""The host: the only process that imports the student's modules.

It serves calls from the judge on a listening socket it inherits (fd given on the command
line): call a function of a student module, construct a student class, call a method of
an object it handed out before. Every connection is a sequence of frames; calls on one
connection start in the order they arrive, as they would in one process. While a call
runs, the student's code may call back objects of the judge (a test's approver, a model,
``report_progress``): those go back over the same connection.

Nothing here is trusted: the judge treats whatever comes back as the student's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import socket
import sys
import threading
from typing import Any

from .wire import Codec, Proxy, WireError, pack, read_frame

_connection: contextvars.ContextVar[_Connection] = contextvars.ContextVar("grader_connection")


class _HostCodec(Codec):
    def __init__(self, student: set[str]) -> None:
        super().__init__(lambda module: module.startswith("picourse") and module not in student)
        self.student = student

    def proxy_id(self, value: Any) -> int | None:
        return value._judge_id if isinstance(value, _JudgeObject) else None

    def make_proxy(self, ref: dict[str, Any]) -> Any:
        return _JudgeObject(ref)

    def encode_signal(self, value: Any) -> dict[str, Any] | None:
        from picourse.abort import AbortSignal

        if not isinstance(value, AbortSignal):
            return None
        reason = value.reason if isinstance(value.reason, (str, int, float, type(None))) else None
        return {"t": "signal", "id": 0, "aborted": value.aborted, "reason": reason}

    def decode_signal(self, data: dict[str, Any]) -> Any:
        return _connection.get().signal(int(data["id"]), bool(data["aborted"]), data["reason"])


class _JudgeObject(Proxy):
    """An object of the judge: calling it (or one of its methods) asks the judge."""

    def __init__(self, ref: dict[str, Any]) -> None:
        self._judge_id = int(ref["id"])
        self._callable = bool(ref["callable"])
        self._methods: dict[str, bool] = dict(ref["methods"])
        self._truth = bool(ref.get("truth", True))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._callable:
            raise TypeError("this object of the tests cannot be called")
        return _connection.get().callback(self._judge_id, None, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name not in self._methods:
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            return _connection.get().callback(self._judge_id, name, args, kwargs)

        return method


class _Connection:
    def __init__(self, host: _Host, reader: Any, writer: Any) -> None:
        self.host, self.reader, self.writer = host, reader, writer
        self.loop = asyncio.get_running_loop()
        self.calls: dict[int, asyncio.Task[None]] = {}
        self.replies: dict[int, asyncio.Future[Any]] = {}
        self.controllers: dict[int, Any] = {}
        self._next_callback = 0

    def send(self, message: dict[str, Any]) -> None:
        if threading.current_thread() is threading.main_thread():
            self.writer.write(pack(message))
        else:
            self.loop.call_soon_threadsafe(self.writer.write, pack(message))

    def signal(self, number: int, aborted: bool, reason: Any) -> Any:
        from picourse.abort import AbortController

        controller = self.controllers.get(number)
        if controller is None:
            controller = self.controllers[number] = AbortController()
        if aborted:
            controller.abort(reason)
        return controller.signal

    def callback(self, target: int, method: str | None, args: Any, kwargs: Any) -> Any:
        """On the event loop: the frame leaves at once (a listener's events stay in order
        with the call's result) and an awaitable of the judge's answer is returned, which
        a listener need not await. From a worker thread: the answer itself."""
        if threading.current_thread() is not threading.main_thread():
            future = asyncio.run_coroutine_threadsafe(
                self._ask(target, method, args, kwargs), self.loop
            )
            return future.result()
        return self._post(target, method, args, kwargs)

    async def _ask(self, target: int, method: str | None, args: Any, kwargs: Any) -> Any:
        return await self._post(target, method, args, kwargs)

    def _post(self, target: int, method: str | None, args: Any, kwargs: Any) -> asyncio.Future[Any]:
        self._next_callback += 1
        number = self._next_callback
        reply = self.replies[number] = self.loop.create_future()
        codec = self.host.codec
        self.send(
            {
                "op": "callback",
                "cb": number,
                "ref": target,
                "method": method,
                "args": codec.encode(list(args)),
                "kwargs": codec.encode(dict(kwargs)),
            }
        )
        return reply

    async def serve(self) -> None:
        try:
            while True:
                message = await read_frame(self.reader)
                op = message.get("op")
                if op == "call":
                    number = int(message["call"])
                    task = asyncio.create_task(self._run(number, message))
                    self.calls[number] = task
                    # Let the call start before the next frame is read: an abort the judge
                    # sent after the call must find it running, as it did in the judge.
                    await asyncio.sleep(0)
                elif op == "cancel":
                    task_or_none = self.calls.get(int(message["call"]))
                    if task_or_none is not None:
                        task_or_none.cancel()
                elif op == "reply":
                    self._answer(message)
                elif op == "abort":
                    self.signal(int(message["sig"]), True, message.get("reason"))
        except (asyncio.IncompleteReadError, ConnectionError, WireError):
            pass
        finally:
            for task in self.calls.values():
                task.cancel()
            for reply in self.replies.values():
                if not reply.done():
                    reply.set_exception(ConnectionError("the judge closed the connection"))
            self.writer.close()

    def _answer(self, message: dict[str, Any]) -> None:
        reply = self.replies.pop(int(message["cb"]), None)
        if reply is None or reply.done():
            return
        codec = self.host.codec
        if "error" in message:
            reply.set_exception(codec.decode_error(message["error"]))
        else:
            try:
                reply.set_result(codec.decode(message.get("value")))
            except WireError as error:
                reply.set_exception(error)

    async def _run(self, number: int, message: dict[str, Any]) -> None:
        _connection.set(self)
        codec = self.host.codec
        try:
            function = self.host.resolve(message)
            if message.get("get"):  # a module-level value, not a call
                value = codec.encode(function)
                self.send({"op": "result", "call": number, "value": value})
                return
            args = codec.decode(message.get("args", []))
            kwargs = codec.decode(message.get("kwargs", {"t": "dict", "v": []}))
            result = function(*args, **kwargs)
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                result = await result
            reply: dict[str, Any] = {"op": "result", "call": number, "value": codec.encode(result)}
        except asyncio.CancelledError:
            reply = {"op": "result", "call": number, "cancelled": True}
        except BaseException as error:  # noqa: BLE001 - the student's failure is the answer
            reply = {"op": "result", "call": number, "error": codec.encode_error(error)}
        finally:
            self.calls.pop(number, None)
        with contextlib.suppress(Exception):
            self.send(reply)


class _Host:
    def __init__(self, student: set[str]) -> None:
        self.student = student
        self.codec = _HostCodec(student)

    def resolve(self, message: dict[str, Any]) -> Any:
        if "module" in message:
            module = str(message["module"])
            if module not in self.student:
                raise WireError(f"{module} is not a student module")
            return getattr(importlib.import_module(module), str(message["name"]))
        target = self.codec.own[int(message["ref"])]
        method = message.get("method")
        return target if method is None else getattr(target, str(method))

    async def accept(self, reader: Any, writer: Any) -> None:
        await _Connection(self, reader, writer).serve()


async def _serve(listener: socket.socket, student: set[str]) -> None:
    host = _Host(student)
    server = await asyncio.start_unix_server(host.accept, sock=listener)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    listen_fd, src, *student = argv
    sys.path.insert(0, src)
    listener = socket.socket(fileno=int(listen_fd))
    asyncio.run(_serve(listener, set(student)))


if __name__ == "__main__":
    main(sys.argv[1:])
