"""Server reflection v1 (what grpcurl 1.9+, Postman and grpc-java tooling ask first) and v1alpha."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2
from agentscope_memory_server.app import RunningServer

PATHS = {
    "v1": "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "v1alpha": "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
}


async def ask(address: str, version: str, *requests: reflection_pb2.ServerReflectionRequest,
              metadata: tuple[tuple[str, str], ...] = ()) -> list[reflection_pb2.ServerReflectionResponse]:
    async with grpc.aio.insecure_channel(address) as channel:
        call = channel.stream_stream(
            PATHS[version],
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )(iter(requests), metadata=metadata)
        return [response async for response in call]


def files(response: reflection_pb2.ServerReflectionResponse) -> list[descriptor_pb2.FileDescriptorProto]:
    return [descriptor_pb2.FileDescriptorProto.FromString(raw)
            for raw in response.file_descriptor_response.file_descriptor_proto]


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
async def test_both_versions_list_the_services_and_describe_them_with_comments(
        server: RunningServer, version: str) -> None:
    listed, described = await ask(
        server.address, version,
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="agentscope.memory.v1.MemoryService"),
    )
    names = {service.name for service in listed.list_services_response.service}
    assert {"agentscope.memory.v1.MemoryService", "agentscope.memory.v1.LongTermMemoryService",
            "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection"} <= names
    memory_file = next(f for f in files(described) if any(s.name == "MemoryService" for s in f.service))
    assert any(location.leading_comments for location in memory_file.source_code_info.location)


async def test_v1_describes_itself_under_its_own_package(server: RunningServer) -> None:
    (found,) = await ask(server.address, "v1",
                         reflection_pb2.ServerReflectionRequest(file_containing_symbol="grpc.reflection.v1.ServerReflection"))
    (reflection_file,) = files(found)
    assert reflection_file.package == "grpc.reflection.v1"
    method = reflection_file.service[0].method[0]
    assert (method.input_type, method.output_type) == (
        ".grpc.reflection.v1.ServerReflectionRequest", ".grpc.reflection.v1.ServerReflectionResponse")


async def test_an_unknown_symbol_is_not_found(server: RunningServer) -> None:
    (missing,) = await ask(server.address, "v1",
                           reflection_pb2.ServerReflectionRequest(file_containing_symbol="agentscope.memory.v1.不存在"))
    assert missing.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


async def test_reflection_needs_no_api_key_but_the_services_do(server_factory) -> None:
    running = await server_factory(api_keys={"clé-de-test-0123456789": "tenant-a"})
    (listed,) = await ask(running.address, "v1", reflection_pb2.ServerReflectionRequest(list_services=""))
    assert "agentscope.memory.v1.MemoryService" in {s.name for s in listed.list_services_response.service}
    async with grpc.aio.insecure_channel(running.address) as channel:
        get_memory = channel.unary_unary(
            "/agentscope.memory.v1.MemoryService/GetMemory",
            request_serializer=memory_service_pb2.GetMemoryRequest.SerializeToString,
            response_deserializer=memory_service_pb2.GetMemoryResponse.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await get_memory(memory_service_pb2.GetMemoryRequest(memory_id="m"))
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
async def test_a_method_is_a_symbol_too(server: RunningServer, version: str) -> None:
    # What `grpcurl describe agentscope.memory.v1.MemoryService.GetMemory` asks for.
    found, missing = await ask(
        server.address, version,
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="agentscope.memory.v1.MemoryService.GetMemory"),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="agentscope.memory.v1.MemoryService.不存在"),
    )
    assert any(m.name == "GetMemory" for f in files(found) for s in f.service for m in s.method)
    assert missing.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
