package dev.agentscopememory.client;

/** The kinds of short-term memory the server keeps; fixed when a memory is created. */
public enum MemoryKind {

    /** A plain message list with AgentScope-Java {@code InMemoryMemory}'s semantics. */
    IN_MEMORY,

    /**
     * AgentScope-Java {@code AutoContextMemory}: working and original histories, with compression
     * run by the server.
     */
    AUTO_CONTEXT,

    /**
     * Loom's tiered working memory: token-budgeted L1 (recent), L2 (important), L3 (session
     * summaries) and L4 (long-term memory), with promotion, compaction and context projection.
     */
    TIERED
}
