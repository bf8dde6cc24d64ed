"""Property-based fuzzing of raw request bytes for every ScopeService RPC and the scope fields
of the older services: whatever arrives, the answer is never UNKNOWN or INTERNAL."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from conftest import ServerThread, make_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as lpb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2 as spb
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.message import Msg, MsgRole

FORBIDDEN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
SCOPE = lpb.Scope(agent_name="子", user_id="u")
PARENT = lpb.Scope(agent_name="父", user_id="u")
MSG = msg_to_proto(Msg.create(MsgRole.USER, "共享 shared"))
SEEDS: dict[str, list[bytes]] = {
    "SetParent": [spb.SetParentRequest(memory_id="子", parent_memory_id="父").SerializeToString()],
    "CreateChild": [spb.CreateChildRequest(parent_memory_id="父", memory_id="新",
                                           kind=pb.MEMORY_KIND_AUTO_CONTEXT).SerializeToString()],
    "GetLineage": [spb.GetLineageRequest(memory_id="子").SerializeToString()],
    "ListChildren": [spb.ListChildrenRequest(memory_id="父", page_size=1).SerializeToString()],
    "ListInheritedMessages": [spb.ListInheritedMessagesRequest(memory_id="子", page_size=1).SerializeToString()],
    "SetLongTermParent": [spb.SetLongTermParentRequest(scope=SCOPE, parent=PARENT).SerializeToString()],
    "GetLongTermLineage": [spb.GetLongTermLineageRequest(scope=SCOPE).SerializeToString()],
    "AddMessages": [pb.AddMessagesRequest(memory_id="父", messages=[MSG], visibility=2).SerializeToString()],
    "DeleteMemory": [pb.DeleteMemoryRequest(memory_id="父", force=False).SerializeToString()],
}
METHODS = [(f"/agentscope.memory.v1.ScopeService/{m.name}", m.name)
           for m in spb.DESCRIPTOR.services_by_name["ScopeService"].methods]
METHODS += [("/agentscope.memory.v1.MemoryService/AddMessages", "AddMessages"),
            ("/agentscope.memory.v1.MemoryService/DeleteMemory", "DeleteMemory")]


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[grpc.Channel]:
    server = ServerThread(make_settings(tmp_path_factory.mktemp("scopes-fuzz") / "data"))
    try:
        with grpc.insecure_channel(server.address) as channel:
            create = channel.unary_unary("/agentscope.memory.v1.MemoryService/CreateMemory")
            create(pb.CreateMemoryRequest(memory_id="父", kind=pb.MEMORY_KIND_IN_MEMORY).SerializeToString(), timeout=30)
            channel.unary_unary("/agentscope.memory.v1.ScopeService/CreateChild")(
                spb.CreateChildRequest(parent_memory_id="父", memory_id="子").SerializeToString(), timeout=30)
            yield channel
    finally:
        server.stop()


def _mutations(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    seed = st.sampled_from(seeds or [b""])

    def flip(data: bytes, at: int, value: int) -> bytes:
        if not data:
            return bytes([value])
        at %= len(data)
        return data[:at] + bytes([value]) + data[at + 1:]

    return st.one_of(
        st.binary(max_size=128),
        st.builds(flip, seed, st.integers(0, 10_000), st.integers(0, 255)),
        st.builds(lambda d, n: d[: n % (len(d) + 1)], seed, st.integers(0, 10_000)),
    )


@pytest.mark.parametrize(("path", "name"), METHODS, ids=[m[1] for m in METHODS])
def test_raw_bytes_never_give_unknown_or_internal(channel: grpc.Channel, path: str, name: str) -> None:
    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(_mutations(SEEDS.get(name, [])))
    def check(data: bytes) -> None:
        try:
            channel.unary_unary(path)(data, timeout=30)
        except grpc.RpcError as exc:
            assert exc.code() not in FORBIDDEN, (name, data[:80], exc.details())  # type: ignore[attr-defined]

    check()
