"""Paging shared by every listing: signed page tokens and etags, and the byte budget of a page."""

from agentscope_memory.paging.budget import cut_to_budget, read_within_budget
from agentscope_memory.paging.tokens import INVALID_TOKEN, ListState, PageTokens, Snapshot

__all__ = ["INVALID_TOKEN", "ListState", "PageTokens", "Snapshot", "cut_to_budget", "read_within_budget"]
