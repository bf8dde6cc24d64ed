"""AgentScope sessions: the JsonSession on-disk format and the state keys memories use."""

from agentscope_memory.session.json_session import JsonSession, SessionFileError, session_dir_name
from agentscope_memory.session.state import MEMORY_MESSAGES, StateEntry

__all__ = ["MEMORY_MESSAGES", "JsonSession", "SessionFileError", "StateEntry", "session_dir_name"]
