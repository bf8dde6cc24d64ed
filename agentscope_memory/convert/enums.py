"""The pairs of wire enum values and library names that both conversion directions share."""

from __future__ import annotations

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as pb
from agentscope_memory.long_term.modes import Mode
from agentscope_memory.message import MsgRole
from agentscope_memory.short_term.auto_context.config import CL100K, IMPROVED, JAVA_ESTIMATE, PARITY

ROLE_TO_PB = {
    None: pb.ROLE_UNSPECIFIED,
    MsgRole.USER: pb.ROLE_USER,
    MsgRole.ASSISTANT: pb.ROLE_ASSISTANT,
    MsgRole.SYSTEM: pb.ROLE_SYSTEM,
    MsgRole.TOOL: pb.ROLE_TOOL,
}
ROLE_FROM_PB = {v: k for k, v in ROLE_TO_PB.items()}

KIND_TO_PB = {"IN_MEMORY": mem_pb.MEMORY_KIND_IN_MEMORY, "AUTO_CONTEXT": mem_pb.MEMORY_KIND_AUTO_CONTEXT,
              "TIERED": mem_pb.MEMORY_KIND_TIERED}
KIND_FROM_PB: dict[int, str] = {v: k for k, v in KIND_TO_PB.items()}

PROFILE_TO_PB = {PARITY: mem_pb.AUTO_CONTEXT_PROFILE_PARITY, IMPROVED: mem_pb.AUTO_CONTEXT_PROFILE_IMPROVED}
PROFILE_FROM_PB = {**{v: k for k, v in PROFILE_TO_PB.items()}, mem_pb.AUTO_CONTEXT_PROFILE_UNSPECIFIED: PARITY}

COUNTER_TO_PB = {JAVA_ESTIMATE: mem_pb.TOKEN_COUNTER_JAVA_ESTIMATE, CL100K: mem_pb.TOKEN_COUNTER_CL100K}
COUNTER_FROM_PB = {**{v: k for k, v in COUNTER_TO_PB.items()}, mem_pb.TOKEN_COUNTER_UNSPECIFIED: JAVA_ESTIMATE}

MODE_TO_PB = {
    Mode.AGENT_CONTROL: ltm_pb.LONG_TERM_MEMORY_MODE_AGENT_CONTROL,
    Mode.STATIC_CONTROL: ltm_pb.LONG_TERM_MEMORY_MODE_STATIC_CONTROL,
    Mode.BOTH: ltm_pb.LONG_TERM_MEMORY_MODE_BOTH,
}
MODE_FROM_PB: dict[int, Mode] = {v: k for k, v in MODE_TO_PB.items()}

# AutoContextConfig's numeric fields, named alike in the proto and the library.
AUTO_CONTEXT_NUMBERS = (
    "msg_threshold", "max_token", "token_ratio", "last_keep", "large_payload_threshold",
    "offload_single_preview", "min_consecutive_tool_messages", "current_round_compression_ratio",
    "min_compression_token_threshold",
)
AUTO_CONTEXT_PROMPTS = (
    "previous_round_tool_compress_prompt", "previous_round_summary_prompt",
    "current_round_large_message_prompt", "current_round_compress_prompt",
)
