"""TIERED memories: Loom's token-budgeted L1-L4 working memory (see `engine.py` for the rules,
`kind.py` for storage and session keys, `service.py` for the operations, `projection.py` for
the context a model call gets)."""

from agentscope_memory.short_term.tiered.config import TieredConfig
from agentscope_memory.short_term.tiered.items import L1, L2, L3, L4, MARKER_TEXT, TierEvent, TierItem

__all__ = ["L1", "L2", "L3", "L4", "MARKER_TEXT", "TierEvent", "TierItem", "TieredConfig"]
