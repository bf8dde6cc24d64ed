package dev.agentscopememory.client;

/** The kinds of short-term memory the server keeps; fixed when a memory is created. */
public enum MemoryKind {

    /** A plain message list with AgentScope-Java {@code InMemoryMemory}'s semantics. */
    IN_MEMORY,

    /**
     * AgentScope-Java {@code AutoContextMemory}: working and original histories, with compression
     * run by the server.
     */
    AUTO_CONTEXT
}
