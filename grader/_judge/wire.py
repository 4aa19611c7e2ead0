"""The wire between the judge and the host: length-prefixed JSON frames and a codec.

Only data crosses: JSON values, bytes, paths, tuples, dicts, dataclasses of the pristine
``picourse`` modules (rebuilt field by field on the other side, never unpickled), the
runtime's ``ToolRegistry`` (its tools, rebuilt in a registry of the receiver's own), abort
signals, exceptions by name and message, and references. A reference names an object
that stays where it lives (a test's callback in the judge, a student's object in the
host); calling it sends a message back to its owner.
"""

from __future__ import annotations

import base64
import builtins
import dataclasses
import importlib
import inspect
import json
import socket
import struct
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath
from typing import Any

MAX_FRAME = 64 << 20  # a tool's arguments and output; file contents travel by path
_HEADER = struct.Struct(">I")
# Exceptions that would stop the receiver itself rather than fail one call.
_NEVER_RAISED = (KeyboardInterrupt, SystemExit, GeneratorExit)


class WireError(Exception):
    """The peer sent something that is not a frame of this protocol."""


def pack(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode()
    if len(data) > MAX_FRAME:
        raise WireError(f"a message of {len(data)} bytes is larger than {MAX_FRAME}")
    return _HEADER.pack(len(data)) + data


def unpack(data: bytes) -> dict[str, Any]:
    try:
        message = json.loads(data)
    except ValueError as error:
        raise WireError(f"not JSON: {error}") from None
    if not isinstance(message, dict):
        raise WireError("a frame must hold a JSON object")
    return message


def frame_size(header: bytes) -> int:
    size: int = _HEADER.unpack(header)[0]
    if size > MAX_FRAME:
        raise WireError(f"a frame of {size} bytes is larger than {MAX_FRAME}")
    return size


async def read_frame(reader: Any) -> dict[str, Any]:
    """From an ``asyncio.StreamReader``; ``IncompleteReadError`` at the end."""
    size = frame_size(await reader.readexactly(_HEADER.size))
    return unpack(await reader.readexactly(size))


def recv_frame(sock: socket.socket) -> dict[str, Any]:
    size = frame_size(_recv_exactly(sock, _HEADER.size))
    return unpack(_recv_exactly(sock, size))


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def is_async(value: Any) -> bool:
    return inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(
        getattr(value, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def describe(value: Any) -> dict[str, Any]:
    """How the peer may use one of our objects: called, and which methods (async or not)."""
    methods = {}
    kind = type(value)
    if not inspect.isroutine(value):
        for name in dir(kind):
            attribute = getattr(kind, name, None)
            if not name.startswith("_") and inspect.isroutine(attribute):
                methods[name] = inspect.iscoroutinefunction(attribute)
    return {
        "callable": callable(value),
        "async": is_async(value),
        "methods": methods,
        "type": kind.__name__,
        "truth": _truth(value),
    }


def _truth(value: Any) -> bool:
    """Its truth when sent: code on the other side may test it (``on_event or None`` keeps
    a listener only if it is true, and an empty list with ``__call__`` is false)."""
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - a __bool__ that fails: as an object without one
        return True


class Proxy:
    """Either side's stand-in for an object of the peer: true or false as that object was
    when it was sent (``describe``)."""

    _truth = True

    def __bool__(self) -> bool:
        return self._truth


class Codec:
    """Turns values into JSON trees and back for one side of the wire.

    ``allowed(module)`` says which modules' dataclasses may be rebuilt here; ``own`` holds
    the objects this side handed out by reference, so the peer can name them again.
    """

    def __init__(self, allowed: Callable[[str], bool]) -> None:
        self.allowed = allowed
        self.own: dict[int, Any] = {}
        self._by_identity: dict[int, int] = {}

    # ---------------------------------------------------------------- hooks of a side
    def proxy_id(self, value: Any) -> int | None:
        """The peer's id when ``value`` is our proxy of one of the peer's objects."""
        return None

    def make_proxy(self, ref: dict[str, Any]) -> Any:
        raise NotImplementedError

    def encode_signal(self, value: Any) -> dict[str, Any] | None:
        return None

    def decode_signal(self, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def check_shareable(self, value: Any) -> None:
        """Raise when ``value`` must not be handed to the peer by reference."""

    # ---------------------------------------------------------------- values
    def encode(self, value: Any) -> Any:
        if value is None or type(value) in (bool, int, float, str):
            return value
        for base in (bool, int, float, str):  # a subclass (an enum) travels as its base
            if isinstance(value, base):
                return base(value)
        # A container that can be called (a list with __call__ as an event recorder) is
        # behaviour, not only data: it crosses by reference, below, like any callable.
        data = not callable(value)
        if isinstance(value, list) and data:
            return [self.encode(item) for item in value]
        if isinstance(value, tuple) and not hasattr(value, "_fields") and data:
            return {"t": "tuple", "v": [self.encode(item) for item in value]}
        if isinstance(value, dict) and data:
            return {"t": "dict", "v": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
        if isinstance(value, (bytes, bytearray)):
            return {"t": "bytes", "v": base64.b64encode(bytes(value)).decode()}
        if isinstance(value, PurePath):
            return {"t": "path", "v": str(value)}
        signal = self.encode_signal(value)
        if signal is not None:
            return signal
        peer = self.proxy_id(value)
        if peer is not None:
            return {"t": "peer", "id": peer}
        if type(value).__name__ == "ToolRegistry" and type(value) is self._registry_class():
            # By value: a reference's synchronous methods (list, names, definitions) could
            # only answer the peer's synchronous code with a future. The copy's tools call
            # back here; a tool registered on the copy stays on that side.
            return {"t": "registry", "v": [self.encode(tool) for tool in value.list()]}
        kind = self._known_base(type(value))
        if dataclasses.is_dataclass(value) and not isinstance(value, type) and kind is not None:
            fields = {
                f.name: self.encode(getattr(value, f.name)) for f in dataclasses.fields(value)
            }
            return {"t": "dc", "c": f"{kind.__module__}:{kind.__qualname__}", "f": fields}
        return self.reference(value)

    def _known_base(self, kind: type) -> type | None:
        """The class itself or its nearest base that is a dataclass this side may send
        (a student's subclass of ``ToolOutput`` travels as a ``ToolOutput``)."""
        for base in kind.__mro__:
            if dataclasses.is_dataclass(base) and self.allowed(base.__module__):
                return base
        return None

    def reference(self, value: Any) -> dict[str, Any]:
        self.check_shareable(value)
        handle = self._by_identity.get(id(value))
        if handle is None or self.own.get(handle) is not value:
            handle = len(self.own) + 1
            self.own[handle] = value
            self._by_identity[id(value)] = handle
        return {"t": "ref", "id": handle, **describe(value)}

    def decode(self, data: Any) -> Any:
        if data is None or isinstance(data, (bool, int, float, str)):
            return data
        if isinstance(data, list):
            return [self.decode(item) for item in data]
        if not isinstance(data, dict):
            raise WireError(f"cannot decode {type(data).__name__}")
        tag = data.get("t")
        if tag == "tuple":
            return tuple(self.decode(item) for item in data["v"])
        if tag == "dict":
            return {self.decode(k): self.decode(v) for k, v in data["v"]}
        if tag == "bytes":
            return base64.b64decode(data["v"])
        if tag == "path":
            return Path(data["v"])
        if tag == "signal":
            return self.decode_signal(data)
        if tag == "peer":
            try:
                return self.own[int(data["id"])]
            except KeyError:
                raise WireError(f"no object {data['id']} here") from None
        if tag == "dc":
            return self._rebuild(data)
        if tag == "registry":
            return self._rebuild_registry(data)
        if tag == "ref":
            return self.make_proxy(data)
        raise WireError(f"unknown tag {tag!r}")

    def _rebuild(self, data: dict[str, Any]) -> Any:
        module, _, qualname = str(data["c"]).partition(":")
        kind = self._class_named(module, qualname)
        if kind is None or not dataclasses.is_dataclass(kind):
            raise WireError(f"{data['c']} is not a dataclass defined in {module}")
        names = {f.name for f in dataclasses.fields(kind)}
        given = data["f"]
        if set(given) != names:
            raise WireError(f"{data['c']} has the fields {sorted(names)}, not {sorted(given)}")
        value = object.__new__(kind)
        for name, field in given.items():
            object.__setattr__(value, name, self.decode(field))
        return value

    def _registry_class(self) -> Any:
        return self._class_named("picourse.tool", "ToolRegistry")

    def _rebuild_registry(self, data: dict[str, Any]) -> Any:
        registry, tool = self._registry_class(), self._class_named("picourse.tool", "Tool")
        if registry is None or tool is None or not isinstance(data.get("v"), list):
            raise WireError("a ToolRegistry cannot be rebuilt here")
        tools = [self.decode(item) for item in data["v"]]
        if not all(type(item) is tool for item in tools):
            raise WireError("a ToolRegistry holds Tools only")
        try:
            return registry(tools)
        except ValueError as error:  # two tools of one name
            raise WireError(f"not a ToolRegistry: {error}") from None

    # ---------------------------------------------------------------- exceptions
    def encode_error(self, error: BaseException) -> dict[str, Any]:
        kind = type(error)
        try:
            args = self.encode(list(error.args))
        except Exception:  # noqa: BLE001 - an argument we cannot send: its text will do
            args = [str(error)]
        # The nearest class the other side knows, so that a student's own subclass of
        # PathError or ValueError is still caught as one.
        base = next(
            k for k in kind.__mro__ if k.__module__ == "builtins" or self.allowed(k.__module__)
        )
        return {
            "type": kind.__name__,
            "module": kind.__module__,
            "base": [base.__name__, base.__module__],
            "args": args,
            "text": str(error),
        }

    def _error_class(self, name: str, module: str) -> Any:
        kind: Any = getattr(builtins, name, None) if module == "builtins" else None
        if kind is None and module:
            kind = self._class_named(module, name)
        if isinstance(kind, type) and issubclass(kind, BaseException):
            return kind
        return None

    def _class_named(self, module: str, qualname: str) -> type | None:
        """The plain class ``module:qualname`` of a module this side may rebuild from,
        looked up in namespaces only and only where it was defined under that name.

        The peer chooses both names. Following them with ``getattr`` would reach objects
        with attribute hooks of their own (in the judge, the stubs of the student's
        modules, reachable as attributes of a package), and a hook that runs on the
        peer's say-so lets the peer act inside this process: a stub's hook decides where
        a test runs. A ``__main__`` module would run a program when imported."""
        if not self.allowed(module) or module.rpartition(".")[2] == "__main__":
            return None
        try:
            found: Mapping[str, Any] = vars(importlib.import_module(module))
        except ImportError:
            return None
        kind: Any = None
        for part in qualname.split("."):
            kind = found.get(part)
            if type(kind) is not type:  # a plain class, without a metaclass's hooks
                return None
            found = vars(kind)
        if kind.__module__ != module or kind.__qualname__ != qualname:
            return None
        return kind  # type: ignore[no-any-return]

    def decode_error(self, data: dict[str, Any]) -> BaseException:
        name, module = str(data.get("type", "Exception")), str(data.get("module", ""))
        kind = self._error_class(name, module)
        if kind is None or issubclass(kind, _NEVER_RAISED):
            base_name, base_module = [*(data.get("base") or []), "Exception", "builtins"][:2]
            base = self._error_class(str(base_name), str(base_module))
            if base is None or issubclass(base, _NEVER_RAISED) or not issubclass(base, Exception):
                base = Exception
            kind = type(name, (base,), {"__module__": "student"})
        try:
            args = self.decode(data.get("args", []))
            error = kind(*args)
        except Exception:  # noqa: BLE001 - a constructor that wants other arguments
            error = kind.__new__(kind)
            error.args = (str(data.get("text", "")),)
        return error  # type: ignore[no-any-return]
