"""Server reflection under both names clients ask for: grpc.reflection.v1 and v1alpha.

grpcio-reflection serves only `grpc.reflection.v1alpha.ServerReflection`, while newer clients
(grpcurl 1.9+, Postman, grpc-java's and grpc-go's tooling) ask for `grpc.reflection.v1` first.
The two protocols are the same messages with the same field numbers under another package, so
one servicer answers both: the v1 method decodes and encodes with the v1alpha message classes,
and a v1 copy of the reflection file is added to the pool so `describe` works for it too.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha import _async as reflection_aio

from agentscope_memory_server.reflection_docs import DocumentedPool
from agentscope_memory_server.registration import WrappingRegistrar

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
_V1ALPHA = "grpc.reflection.v1alpha"
_V1 = "grpc.reflection.v1"


def v1_file() -> descriptor_pb2.FileDescriptorProto:
    """The v1alpha reflection file renamed to its v1 package (same messages, same numbers)."""
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    proto.name = "grpc/reflection/v1/reflection.proto"
    proto.package = _V1
    for message in proto.message_type:
        for field in message.field:
            if field.type_name.startswith(f".{_V1ALPHA}."):
                field.type_name = f".{_V1}." + field.type_name[len(_V1ALPHA) + 2:]
    for service in proto.service:
        for method in service.method:
            method.input_type = f".{_V1}." + method.input_type[len(_V1ALPHA) + 2:]
            method.output_type = f".{_V1}." + method.output_type[len(_V1ALPHA) + 2:]
    return proto


def enable_reflection(service_names: Sequence[str], server: WrappingRegistrar, pool: DocumentedPool) -> None:
    """Serves reflection v1 and v1alpha for `service_names` (plus both reflection services)."""
    pool.add(v1_file())
    names = (*service_names, reflection.SERVICE_NAME, V1_SERVICE_NAME)
    servicer = reflection_aio.ReflectionServicer(names, pool=pool)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
    v1 = grpc.method_handlers_generic_handler(V1_SERVICE_NAME, {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        ),
    })
    server.add_generic_rpc_handlers((v1,))
