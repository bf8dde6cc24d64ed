"""The assembly point: the whole memory service built from settings, usable without gRPC.

    service = build_service(ServiceSettings(data_dir=Path("./data")))
    async with service:
        await service.memories.create_memory("default", "chat-1", "IN_MEMORY")
"""

from agentscope_memory.service.assembly import Service, build_service
from agentscope_memory.service.settings import ServiceSettings

__all__ = ["Service", "ServiceSettings", "build_service"]
