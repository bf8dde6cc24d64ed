"""Short-term memories: the manager, InMemoryMemory and AutoContextMemory."""
