"""Client-side checks of the ids in a request, before it is sent: the server's own rules
(`agentscope_memory.validation`), so a bad id fails at the call with the server's message
instead of after a round trip; messages that cannot be put on the wire at all are named the
same way, and so is any argument whose text protobuf cannot encode (`refuse_unencodable_in`).
Responses are never checked: what the server returns is read."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
from typing import Any, AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence, TypeVar

from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as pb
from agentscope_memory.convert.to_proto import msg_to_proto, msgs_to_proto
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.validation.ids import check_id, check_request_id, utf8_length
from agentscope_memory.validation.messages import check_msg, check_msgs

_ID_FIELDS = ("memory_id", "session_id")


def check_request(request: Any) -> None:
    if isinstance(request, (list, tuple)):
        # A client-streaming call (StreamLoadState): the first piece names the memory.
        if request:
            check_request(request[0])
        return
    fields = request.DESCRIPTOR.fields_by_name
    for name in _ID_FIELDS:
        if name in fields:
            check_id(getattr(request, name), name)
    if "memory_ids" in fields:
        for i, memory_id in enumerate(request.memory_ids):
            check_id(memory_id, f"memory_ids[{i}]")
    if "scope" in fields:
        scope = request.scope
        Scope(scope.agent_name, scope.user_id, scope.run_name).validate("scope")
    if "id" in fields and request.DESCRIPTOR.name.endswith("LongTermMemoryRequest"):
        check_id(request.id, "id")


def msgs_on_wire(msgs: Sequence[Msg], field: str = "messages") -> list[pb.Msg]:
    """`msgs` as protobuf messages for a request. Text holding a lone surrogate (AgentScope
    keeps them: its JSONSession reads with `surrogatepass`) has no UTF-8 form and protobuf
    refuses it with a bare UnicodeEncodeError; the server's own check names the field instead."""
    try:
        return msgs_to_proto(list(msgs))
    except UnicodeEncodeError:
        check_msgs(msgs, field)
        raise


def msg_on_wire(msg: Msg, field: str = "message") -> pb.Msg:
    """One message as `msgs_on_wire` converts it."""
    try:
        return msg_to_proto(msg)
    except UnicodeEncodeError:
        check_msg(msg, field)
        raise


def _strings(value: Any, path: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    """Every (field, text) in an argument: the argument itself, an item of a sequence
    (`memory_ids[2]`), a key or value of a mapping (`labels['键']`), a dataclass's field
    (`scope.user_id`, as `Scope.validate` names it)."""
    if isinstance(value, str):
        yield path, value
    elif depth < 4 and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key, f"{path}[{key!r}]", depth + 1)
            yield from _strings(item, f"{path}[{key!r}]", depth + 1)
    elif depth < 4 and isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]", depth + 1)
    elif depth < 4 and dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _strings(getattr(value, field.name), f"{path}.{field.name}", depth + 1)


F = TypeVar("F", bound=Callable[..., Any])

# The server's own check of an argument where it is more than "Unicode text" (its refusal then
# says what the field must be, as the local mode's does).
_CHECKS: dict[str, Callable[[str, str], object]] = {"request_id": check_request_id}


def fields_named(**fields: str) -> Callable[[F], F]:
    """Refusals of `refusing_unencodable` name these arguments as the request fields they fill,
    as the server does (a long-term memory's `memory_id` is its requests' `id`)."""

    def mark(method: F) -> F:
        method.request_fields = fields  # type: ignore[attr-defined]
        return method

    return mark


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unencodable(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 exc: UnicodeEncodeError) -> InvalidArgumentError | None:
    """The local mode's refusal of the argument whose text protobuf could not encode (a lone
    surrogate: no UTF-8 form), named by the method's parameter; None if no argument holds one."""
    try:
        bound = inspect.signature(method).bind(*args, **kwargs)
    except TypeError:
        return None
    names: dict[str, str] = getattr(method, "request_fields", {})
    found = [(field, text) for name, value in bound.arguments.items() if name != "self"
             for field, text in _strings(value, names.get(name, name)) if not _encodable(text)]
    if not found:
        return None
    # The text protobuf refused, else the first one holding a surrogate.
    field, text = next(((f, t) for f, t in found if t == exc.object), found[0])
    try:
        _CHECKS.get(field, utf8_length)(text, field)
    except InvalidArgumentError as refusal:
        return refusal
    return None


def refusing_unencodable(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` (a client's public method: a coroutine, an async or plain generator, a plain
    function, or one returning an iterator) raising the local mode's InvalidArgumentError,
    naming the argument, where protobuf raises a bare UnicodeEncodeError for text holding a lone
    surrogate: one place for every request a client builds, instead of each builder."""

    def refusal(exc: UnicodeEncodeError, args: tuple[Any, ...], kwargs: dict[str, Any]) -> BaseException:
        return _unencodable(method, args, kwargs, exc) or exc

    def iterate(result: Iterator[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[Any]:
        try:
            return (yield from result)
        except UnicodeEncodeError as exc:
            raise refusal(exc, args, kwargs) from None

    async def iterate_async(result: AsyncGenerator[Any, Any], args: tuple[Any, ...],
                            kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        try:
            async with contextlib.aclosing(result) as items:
                async for item in items:
                    yield item
        except UnicodeEncodeError as exc:
            raise refusal(exc, args, kwargs) from None

    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def call_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await method(*args, **kwargs)
            except UnicodeEncodeError as exc:
                raise refusal(exc, args, kwargs) from None
        return call_async

    # Generators keep their kind: callers (the blocking local clients) tell them apart by it.
    if inspect.isasyncgenfunction(method):
        @functools.wraps(method)
        async def call_async_gen(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for item in iterate_async(method(*args, **kwargs), args, kwargs):
                yield item
        return call_async_gen

    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def call_gen(*args: Any, **kwargs: Any) -> Iterator[Any]:
            return (yield from iterate(method(*args, **kwargs), args, kwargs))
        return call_gen

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = method(*args, **kwargs)
        except UnicodeEncodeError as exc:
            raise refusal(exc, args, kwargs) from None
        # An iterator returned (a watch's) builds its requests as it is iterated.
        if inspect.isgenerator(result):
            return iterate(result, args, kwargs)
        if inspect.isasyncgen(result):
            return iterate_async(result, args, kwargs)
        return result
    return call


def refuse_unencodable_in(cls: type) -> None:
    """Every public method `cls` defines itself, as `refusing_unencodable` wraps it."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, refusing_unencodable(member))
