"""AgentScope's long-term memory modes (`LongTermMemoryMode`)."""

from __future__ import annotations

from enum import Enum

from agentscope_memory.errors import InvalidArgumentError


class Mode(str, Enum):
    """Who drives long-term memory: the agent through tools, the framework around every call, or both."""

    AGENT_CONTROL = "AGENT_CONTROL"
    STATIC_CONTROL = "STATIC_CONTROL"
    BOTH = "BOTH"

    @property
    def static(self) -> bool:
        return self in (Mode.STATIC_CONTROL, Mode.BOTH)

    @property
    def agent(self) -> bool:
        return self in (Mode.AGENT_CONTROL, Mode.BOTH)


def parse_mode(value: str) -> Mode:
    try:
        return Mode(value)
    except ValueError:
        raise InvalidArgumentError("mode", "must be AGENT_CONTROL, STATIC_CONTROL or BOTH") from None
