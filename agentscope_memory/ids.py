"""Kept for imports written before `agentscope_memory.validation`; the rules live there."""

from agentscope_memory.validation.ids import MAX_ID_BYTES, check_id, check_request_id

__all__ = ["MAX_ID_BYTES", "check_id", "check_request_id"]
