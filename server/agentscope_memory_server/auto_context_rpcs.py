"""The AUTO_CONTEXT RPCs of MemoryService (placeholder until AutoContextMemory lands).

Each answers UNIMPLEMENTED with a sentence saying what is missing.
"""

from __future__ import annotations

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory.errors import UnimplementedError
from agentscope_memory_server.errors import unimplemented

_MISSING = "AutoContextMemory is not available on this server yet: {} needs an AUTO_CONTEXT memory"


def auto_context_config_json(config: pb.AutoContextConfig) -> str:
    raise UnimplementedError("MEMORY_KIND_AUTO_CONTEXT memories are not available on this server yet")


class AutoContextRpcs:
    def auto_context_config_to_proto(self, config_json: str) -> pb.AutoContextConfig:
        return pb.AutoContextConfig()

    CompressIfNeeded = unimplemented(_MISSING.format("CompressIfNeeded"))
    PrepareReasoningInput = unimplemented(_MISSING.format("PrepareReasoningInput"))
    GetOriginalMessages = unimplemented(_MISSING.format("GetOriginalMessages"))
    GetInteractionMessages = unimplemented(_MISSING.format("GetInteractionMessages"))
    ReloadContext = unimplemented(_MISSING.format("ReloadContext"))
    ListCompressionEvents = unimplemented(_MISSING.format("ListCompressionEvents"))
    WatchCompressionEvents = unimplemented(_MISSING.format("WatchCompressionEvents"))
    AttachPlanNote = unimplemented(_MISSING.format("AttachPlanNote"))
