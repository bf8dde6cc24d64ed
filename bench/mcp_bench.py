"""MCP tool calls over streamable HTTP against the same operation over gRPC, on one server
process in the same run: the ratio is what MCP's transport (HTTP, JSON-RPC, JSON arguments and
results) costs on top of the service.

Pairs: read a page of 20 working-memory messages (GetMessages / read_working_memory), append one
message (AddMessages / append_working_memory), and a long-term search over 100 memories
(Retrieve / search_long_term_memory, where the embedder dominates).
"""

from __future__ import annotations

import itertools
import sys
import tempfile

import grpc
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2 as lt_pb,
)
from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2_grpc as lt_grpc,
)
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import (
    memory_service_pb2_grpc as pb_grpc,
)
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.message import Msg, MsgRole
from bench.harness import BIN, free_port, measure, process

CALLS = 100


def _ok(result: object) -> None:
    if getattr(result, "isError", False):
        raise RuntimeError(f"MCP tool call failed: {result}")


async def run(results: list[dict]) -> None:
    port, mcp_port = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        args = [str(BIN / "agentscope-memory"), "serve", "--port", str(port), "--data-dir", data, "--log-level", "WARNING"]
        with process(args, address, env_extra={"AGENTSCOPE_MEMORY_MCP_PORT": str(mcp_port), "MEM0_TELEMETRY": "False"}):
            async with grpc.aio.insecure_channel(address) as channel, \
                    httpx.AsyncClient(timeout=120) as http, \
                    streamable_http_client(f"http://127.0.0.1:{mcp_port}/mcp", http_client=http) as (read, write, _), \
                    ClientSession(read, write) as session:
                await session.initialize()
                memories = pb_grpc.MemoryServiceStub(channel)
                long_term = lt_grpc.LongTermMemoryServiceStub(channel)
                await memories.CreateMemory(pb.CreateMemoryRequest(memory_id="bench", kind=pb.MEMORY_KIND_IN_MEMORY))
                await memories.AddMessages(pb.AddMessagesRequest(memory_id="bench", messages=[
                    msg_to_proto(Msg.create(MsgRole.USER, f"message {i} 消息")) for i in range(50)]))
                scope = lt_pb.Scope(user_id="bench")
                await long_term.Record(lt_pb.RecordRequest(scope=scope, messages=[
                    msg_to_proto(Msg.create(MsgRole.USER, f"fact number {i}: the user likes item {i}")) for i in range(100)]),
                    timeout=600)
                counter = itertools.count()

                async def grpc_read() -> None:
                    await memories.GetMessages(pb.GetMessagesRequest(memory_id="bench", page_size=20))

                async def mcp_read() -> None:
                    _ok(await session.call_tool("read_working_memory", {"working_memory_id": "bench", "page_size": 20}))

                async def grpc_append() -> None:
                    await memories.AddMessages(pb.AddMessagesRequest(memory_id="append", messages=[
                        msg_to_proto(Msg.create(MsgRole.USER, f"new {next(counter)}"))]))

                async def mcp_append() -> None:
                    _ok(await session.call_tool("append_working_memory", {"working_memory_id": "append", "messages": [
                        {"role": "user", "text": f"new {next(counter)}"}]}))

                async def grpc_search() -> None:
                    await long_term.Retrieve(lt_pb.RetrieveRequest(scope=scope, limit=5, message=msg_to_proto(
                        Msg.create(MsgRole.USER, f"which item number {next(counter) % 100}"))))

                async def mcp_search() -> None:
                    _ok(await session.call_tool("search_long_term_memory", {
                        "query": f"which item number {next(counter) % 100}", "user_id": "bench", "top_k": 5}))

                await memories.CreateMemory(pb.CreateMemoryRequest(memory_id="append", kind=pb.MEMORY_KIND_IN_MEMORY))
                for name, over_grpc, over_mcp in (
                    ("read 20 messages", grpc_read, mcp_read),
                    ("append 1 message", grpc_append, mcp_append),
                    ("LTM search top 5 @ 100", grpc_search, mcp_search),
                ):
                    base = await measure(over_grpc, CALLS, 1)
                    mcp = await measure(over_mcp, CALLS, 1)
                    results.append({"benchmark": f"gRPC {name}", "concurrency": 1,
                                    **{k: round(v, 3) for k, v in base.items()}})
                    results.append({"benchmark": f"MCP HTTP {name}", "concurrency": 1,
                                    **{k: round(v, 3) for k, v in mcp.items()},
                                    "ratio_to_grpc": round(mcp["p50_ms"] / base["p50_ms"], 2)})
    print("mcp benchmark done", file=sys.stderr)


__all__ = ["run"]
