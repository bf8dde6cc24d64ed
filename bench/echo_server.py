"""The baseline: a bare grpc.aio server answering MemoryService's and SharedPoolService's
messages with no work.

It parses the same requests and returns prebuilt responses of the same shape, so the ratio
to it isolates what the memory service adds on top of gRPC and protobuf.
"""

from __future__ import annotations

import asyncio
import sys

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pool_pb
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2_grpc as pool_grpc
from bench.workload import message, pool_entry


class EchoMemoryService(pb_grpc.MemoryServiceServicer):
    def __init__(self) -> None:
        self._page = pb.GetMessagesResponse(messages=[message(i) for i in range(100)], total_size=100)

    async def AddMessages(self, request, context):
        return pb.AddMessagesResponse(message_count=len(request.messages), version=1)

    async def GetMessages(self, request, context):
        return self._page


class EchoSharedPoolService(pool_grpc.SharedPoolServiceServicer):
    def __init__(self) -> None:
        self._written = pool_pb.WritePoolEntryResponse(entry=pool_entry(0), sequence=1)
        self._read = pool_pb.GetPoolEntryResponse(entry=pool_entry(0))

    async def WritePoolEntry(self, request, context):
        return self._written

    async def GetPoolEntry(self, request, context):
        return self._read


async def main(port: int) -> None:
    server = grpc.aio.server()
    pb_grpc.add_MemoryServiceServicer_to_server(EchoMemoryService(), server)
    pool_grpc.add_SharedPoolServiceServicer_to_server(EchoSharedPoolService(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
