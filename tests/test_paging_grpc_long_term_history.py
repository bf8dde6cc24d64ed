"""GetLongTermMemoryHistory pages: a memory's history larger than 4 MiB (UPDATE entries carry the
old and new metadata, up to 64 KiB each) is read whole through a channel with gRPC's stock
4 MiB receive limit; tokens are bound to the tenant, the memory and the page size; the mem0
REST facade and the inspector read it a page at a time too."""

from __future__ import annotations

import json
import re

import grpc
import httpx
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2 as pb,
)
from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2_grpc as pb_grpc,
)
from agentscope_memory.client import AsyncLongTermClient
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES, GRPC_DEFAULT_RECEIVE

KEY_A = "history-paging-key-a-0001"
KEY_B = "history-paging-key-b-0001"
A = [("x-api-key", KEY_A)]
B = [("x-api-key", KEY_B)]
UPDATES = 45
BLOB = 60_000


async def _code(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await call
    return failure.value.code(), failure.value.details() or ""


async def test_a_history_over_4_mib_is_read_whole_through_a_stock_channel(server_factory) -> None:
    # No background scoring: its ASSESS entries would make the history grow while it is read.
    server = await server_factory(api_keys={KEY_A: "tenant-a", KEY_B: "tenant-b"}, mem0_rest_port=0, inspector_port=0,
                                  long_term_scoring=False)
    scope = Scope(agent_name="助手", user_id="history-user")
    # A channel with gRPC's default limits (4 MiB receive), for the client and the raw stub.
    async with grpc.aio.insecure_channel(server.address) as channel:
        client = AsyncLongTermClient(channel=channel, api_key=KEY_A, timeout=120)
        [item] = await client.record(scope, [Msg.create(MsgRole.USER, "用户喜欢喝绿茶")])
        [other] = await client.record(scope, [Msg.create(MsgRole.USER, "The user sails on weekends")])
        for i in range(UPDATES):
            # Each UPDATE entry holds the old and the new metadata: about 120 KB each, 5.4 MB in all.
            await client.update(item.id, metadata={"blob": f"{i:03d}" + "m" * BLOB})
        await client.update(item.id, text="用户喜欢喝乌龙茶")

        history = await client.history(item.id)
        changes = history
        assert [e.event for e in changes] == ["ADD"] + ["UPDATE"] * (UPDATES + 1)
        assert [e.detail["metadata"]["new"]["blob"][:3] for e in changes[1:-1]] == [f"{i:03d}" for i in range(UPDATES)]
        assert (changes[-1].old_text, changes[-1].new_text) == ("用户喜欢喝绿茶", "用户喜欢喝乌龙茶")
        assert sum(len(json.dumps(e.detail)) for e in history) > GRPC_DEFAULT_RECEIVE

        stub = pb_grpc.LongTermMemoryServiceStub(channel)
        # An old client (no page fields) gets the first page, within the budget.
        first = await stub.GetLongTermMemoryHistory(pb.GetLongTermMemoryHistoryRequest(id=item.id), metadata=A)
        assert first.next_page_token and 1 < len(first.entries) < len(history)
        assert first.ByteSize() <= DEFAULT_PAGE_BYTES
        # The pages, read by hand with page_size 7, are the same list.
        seen, token, pages = [], "", 0
        while True:
            page = await stub.GetLongTermMemoryHistory(
                pb.GetLongTermMemoryHistoryRequest(id=item.id, page_size=7, page_token=token), metadata=A)
            assert len(page.entries) <= 7
            seen += [(e.event, e.created_at, e.detail_json) for e in page.entries]
            token, pages = page.next_page_token, pages + 1
            if pages == 1:
                seven = token
            if not token:
                break
        assert len(seen) == len(history) and pages == -(-len(history) // 7)
        assert [s[0] for s in seen] == [e.event for e in history]

        # Tokens are bound to the memory, the page size and the tenant; forged ones are refused.
        for request, key in (
            (pb.GetLongTermMemoryHistoryRequest(id=other.id, page_size=7, page_token=seven), A),
            (pb.GetLongTermMemoryHistoryRequest(id=item.id, page_size=8, page_token=seven), A),
            (pb.GetLongTermMemoryHistoryRequest(id=item.id, page_token=seven), A),
            (pb.GetLongTermMemoryHistoryRequest(id=item.id, page_size=7, page_token=seven), B),
            (pb.GetLongTermMemoryHistoryRequest(id=item.id, page_size=7, page_token="OTk5OTk5OTk5OTk5OTk5OTk5OTk5"), A),
            (pb.GetLongTermMemoryHistoryRequest(id=item.id, page_size=7, page_token="not a token ✗"), A),
        ):
            assert await _code(stub.GetLongTermMemoryHistory(request, metadata=key)) == (
                grpc.StatusCode.INVALID_ARGUMENT, "page_token: invalid or expired")
        # A bad page_size or id is named; another tenant's memory is missing. A page_size over
        # the maximum is served as the maximum (AIP-158).
        code, details = await _code(stub.GetLongTermMemoryHistory(
            pb.GetLongTermMemoryHistoryRequest(id=item.id, page_size=-1), metadata=A))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("page_size:"), details
        widest = await stub.GetLongTermMemoryHistory(pb.GetLongTermMemoryHistoryRequest(id=item.id, page_size=1001),
                                                     metadata=A)
        assert widest.entries and widest.entries[0].event == "ADD"
        code, details = await _code(stub.GetLongTermMemoryHistory(pb.GetLongTermMemoryHistoryRequest(), metadata=A))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("id:"), details
        assert (await _code(stub.GetLongTermMemoryHistory(
            pb.GetLongTermMemoryHistoryRequest(id=item.id), metadata=B)))[0] == grpc.StatusCode.NOT_FOUND
        assert (await _code(stub.GetLongTermMemoryHistory(
            pb.GetLongTermMemoryHistoryRequest(id="no-such-memory"), metadata=A)))[0] == grpc.StatusCode.NOT_FOUND
        # The largest page size still fits the stock channel.
        biggest = await stub.GetLongTermMemoryHistory(
            pb.GetLongTermMemoryHistoryRequest(id=item.id, page_size=1000), metadata=A)
        assert biggest.next_page_token and biggest.ByteSize() <= DEFAULT_PAGE_BYTES
        await client.close()

    # mem0's REST history keeps mem0's array (texts only, mem0's events), read a page at a time.
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}",
                                 headers={"X-API-Key": KEY_A}, timeout=60) as rest:
        mem0 = (await rest.get(f"/memories/{item.id}/history")).json()
        assert [h["event"] for h in mem0] == ["ADD"] + ["UPDATE"] * (UPDATES + 1)
        assert mem0[-1]["new_memory"] == "用户喜欢喝乌龙茶" and set(mem0[0]) == {
            "memory_id", "event", "old_memory", "new_memory", "created_at", "updated_at"}

    # The inspector shows a page (50 entries within the byte budget) and links the next.
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.inspector_port}",
                                 headers={"X-API-Key": KEY_A}, timeout=60) as web:
        rows, path, pages = 0, f"/long-term/{item.id}/history", 0
        while path:
            response = await web.get(path)
            assert response.status_code == 200 and len(response.content) < 8 * GRPC_DEFAULT_RECEIVE
            rows += response.text.count("<tr><td>")
            pages += 1
            found = re.search(r'<a id="next" href="([^"]+)"', response.text)
            path = found.group(1).replace("&amp;", "&") if found else ""
        assert rows == len(history) and pages > 1
        bad = await web.get(f"/long-term/{item.id}/history?page=forged")
        assert bad.status_code == 400 and "page_token" in bad.text
