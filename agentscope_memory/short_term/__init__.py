"""Short-term memory: an agent's conversation.

`manager.MemoryManager` runs AgentScope's `Memory` operations (validation, limits, idempotent
appends, paging, session state) over any store, for every memory kind; each kind is a handler
of its own (`in_memory.InMemoryKind`: AgentScope's `InMemoryMemory`; `auto_context.kind.AutoContextKind`:
AgentScope-Java's `AutoContextMemory`, whose compression lives in `auto_context/`).
"""
