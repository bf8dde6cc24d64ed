"""Property-based fuzzing of raw request bytes for every RPC of every service: whatever arrives,
the answer is never UNKNOWN or INTERNAL, and the server stays healthy."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from bad_input_corpus import CORPUS_SEEDS
from conftest import ServerThread, make_settings
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_memory._proto.agentscope.memory.v1 import (
    agent_state_service_pb2,
    lifecycle_service_pb2,
    scope_service_pb2,
    shared_pool_service_pb2,
    tiered_memory_service_pb2,
)
from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2 as lpb,
)
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as spb

FORBIDDEN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
# Every service: the corpus's three start from its valid requests, the later ones from a request
# with every scalar field filled; streaming directions come from the descriptors.
METHODS = [
    (f"/{service.full_name}/{method.name}", method.name, method.client_streaming, method.server_streaming)
    for module in (pb, lpb, spb, agent_state_service_pb2, lifecycle_service_pb2, scope_service_pb2,
                   shared_pool_service_pb2, tiered_memory_service_pb2)
    for service in module.DESCRIPTOR.services_by_name.values()
    for method in service.methods
]


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[grpc.Channel]:
    server = ServerThread(make_settings(tmp_path_factory.mktemp("fuzz") / "data"))
    try:
        with grpc.insecure_channel(server.address) as channel:
            yield channel
    finally:
        server.stop()


def _mutations(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    """Random bytes, and valid requests with bytes flipped, cut off or spliced in."""
    seed = st.sampled_from(seeds or [b""])

    def flip(data: bytes, at: int, value: int) -> bytes:
        if not data:
            return bytes([value])
        at %= len(data)
        return data[:at] + bytes([value]) + data[at + 1:]

    return st.one_of(
        st.binary(max_size=256),
        st.builds(flip, seed, st.integers(0, 10_000), st.integers(0, 255)),
        st.builds(lambda d, n: d[: n % (len(d) + 1)], seed, st.integers(0, 10_000)),
        st.builds(lambda d, extra: d + extra, seed, st.binary(max_size=64)),
    )


def _filled_request(path: str) -> bytes:
    """A request of the method's type with every scalar field set (strings in Chinese), as the
    seed that mutations start from: bytes close to a valid request reach deeper code."""
    from google.protobuf import descriptor_pool, message_factory
    from google.protobuf.descriptor import FieldDescriptor

    service_name, method_name = path.strip("/").split("/")
    method = descriptor_pool.Default().FindServiceByName(service_name).FindMethodByName(method_name)
    request = message_factory.GetMessageClass(method.input_type)()
    for field in method.input_type.fields:
        if field.is_repeated or field.type == FieldDescriptor.TYPE_MESSAGE:
            continue
        value = {FieldDescriptor.TYPE_STRING: "种子", FieldDescriptor.TYPE_BOOL: True,
                 FieldDescriptor.TYPE_BYTES: b"x", FieldDescriptor.TYPE_DOUBLE: 0.5,
                 FieldDescriptor.TYPE_FLOAT: 0.5}.get(field.type, 1)
        setattr(request, field.name, value)
    return bytes(request.SerializeToString())


def _call(channel: grpc.Channel, path: str, client_streaming: bool, server_streaming: bool,
          data: bytes) -> grpc.StatusCode:
    try:
        if client_streaming and server_streaming:
            for _ in channel.stream_stream(path)(iter([data]), timeout=2):
                break
        elif client_streaming:
            channel.stream_unary(path)(iter([data]), timeout=30)
        elif server_streaming:
            # A valid watch waits for changes: its first answer (or the deadline) is enough.
            for _ in channel.unary_stream(path)(data, timeout=1):
                break
        else:
            channel.unary_unary(path)(data, timeout=30)
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[attr-defined, no-any-return]
    return grpc.StatusCode.OK


@pytest.mark.parametrize(("path", "name", "client_streaming", "server_streaming"), METHODS,
                         ids=[m[1] for m in METHODS])
def test_raw_bytes_never_give_unknown_or_internal(
        channel: grpc.Channel, path: str, name: str, client_streaming: bool, server_streaming: bool) -> None:
    health = health_pb2_grpc.HealthStub(channel)

    @settings(max_examples=80, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(_mutations(CORPUS_SEEDS.get(name) or [_filled_request(path)]))
    def check(data: bytes) -> None:
        code = _call(channel, path, client_streaming, server_streaming, data)
        assert code not in FORBIDDEN, (name, data[:80])
        assert health.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING

    check()


def test_every_registered_service_is_covered(channel: grpc.Channel) -> None:
    # The decode guard wraps whatever the server resolves, not a list of known services: the
    # standard health service, registered next to ours, answers INVALID_ARGUMENT too.
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary("/grpc.health.v1.Health/Check")(b"\x0a\x02\xff\xfe", timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert err.value.details().startswith("request: cannot be decoded")  # type: ignore[attr-defined]
