"""Client-side checks of the ids in a request, before it is sent: the server's own rules
(`agentscope_memory.validation`), so a bad id fails at the call with the server's message
instead of after a round trip. Responses are never checked: what the server returns is read."""

from __future__ import annotations

from typing import Any

from agentscope_memory.long_term.engine import Scope
from agentscope_memory.validation.ids import check_id

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
