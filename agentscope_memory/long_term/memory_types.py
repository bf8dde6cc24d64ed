"""The types of long-term memory a record holds: searches filter by them, forgetting may spare
some, and the settings name them."""

from __future__ import annotations

from typing import Literal, get_args

MemoryType = Literal["message", "fact", "reflection", "summary"]
MEMORY_TYPES: tuple[MemoryType, ...] = get_args(MemoryType)
REFLECTION: MemoryType = "reflection"
