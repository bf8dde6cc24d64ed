"""`RemoteMem0Client`: the server's long-term memory as the client of AgentScope 2.x's
`Mem0Middleware`.

    from agentscope.middleware import Mem0Middleware      # AgentScope 2.x
    from agentscope_memory.agentscope_adapters import RemoteMem0Client

    client = RemoteMem0Client("http://127.0.0.1:8000", api_key="...")
    agent = Agent(..., middlewares=[Mem0Middleware(user_id="alice", agent_id="Friday", client=client)])

It speaks to the server's mem0 REST facade (`agentscope-memory serve --mem0-rest-port 8000`)
with httpx only, so it adds no gRPC or protobuf to an AgentScope application. Answers are in
mem0's shape: `{"results": [{"memory": ..., "id": ..., "score": ...}, ...]}`.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Self

import httpx

from agentscope_memory.agentscope_adapters.per_loop import PerLoop


# Waits between attempts to reach a server that refused the connection.
RETRY_FIRST_DELAY_S = 0.05
RETRY_MAX_DELAY_S = 0.5


class Mem0ClientError(RuntimeError):
    """The server refused a call; `status` is the HTTP status, the message the server's reason."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(f"agentscope-memory answered {status}: {detail}")


class RemoteMem0Client:
    """Duck-typed mem0 `AsyncMemory`: `search` and `add`, as `Mem0Middleware` calls them."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 60.0,
                 http: httpx.AsyncClient | None = None) -> None:
        headers = {"Authorization": f"Token {api_key}"} if api_key else {}
        self._given = http
        self._timeout = timeout
        self._own = PerLoop(functools.partial(httpx.AsyncClient, base_url=base_url.rstrip("/"), headers=headers,
                                              timeout=timeout))

    @property
    def _http(self) -> httpx.AsyncClient:
        """The caller's client, else this one's for the running event loop: pooled connections
        belong to the loop that opened them, and an application may build its agent before
        `asyncio.run` or run several loops one after another."""
        if self._given is not None:
            return self._given
        return self._own.get()

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        # A server that cannot be reached (restarting, say) is tried again within the timeout,
        # as the gRPC clients do: nothing was sent, so nothing can be stored twice.
        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + self._timeout, RETRY_FIRST_DELAY_S
        while True:
            try:
                response = await self._http.post(path, json=body)
                break
            except httpx.ConnectError:
                if loop.time() + delay >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_DELAY_S)
        if response.status_code >= 400:
            try:
                detail = str(response.json().get("detail", response.text))
            except ValueError:
                detail = response.text
            raise Mem0ClientError(response.status_code, detail)
        return response.json()

    async def search(self, query: str, filters: dict[str, Any] | None = None, top_k: int = 5,
                     threshold: float | None = None, **_: Any) -> dict[str, Any]:
        """The memories matching `query` within `filters` (user_id / agent_id / run_id, other
        keys are metadata equality filters), best first."""
        body: dict[str, Any] = {"query": query, "filters": dict(filters or {}), "top_k": top_k}
        if threshold is not None:
            body["threshold"] = threshold
        result: dict[str, Any] = await self._post("/search", body)
        return result

    async def add(self, messages: list[dict[str, Any]] | str, user_id: str | None = None,
                  agent_id: str | None = None, run_id: str | None = None, infer: bool = True,
                  metadata: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        """Remember `messages`; `infer` asks the server's LLM to extract facts (a server without
        one stores them verbatim and answers `inferred: false`)."""
        body: dict[str, Any] = {"messages": messages, "infer": infer}
        for key, value in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id), ("metadata", metadata)):
            if value is not None:
                body[key] = value
        result: dict[str, Any] = await self._post("/memories", body)
        return result

    async def close(self) -> None:
        http = self._own.take()
        if http is not None:
            await http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
