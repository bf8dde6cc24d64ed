package dev.agentscopememory.client;

/** How a server-side AutoContext memory counts tokens for its compression trigger. */
public enum TokenCounter {

    /**
     * AgentScope-Java's character-based estimate, so compression triggers exactly where the local
     * {@code AutoContextMemory}'s does: the default.
     */
    JAVA_ESTIMATE,

    /**
     * A real cl100k_base tokenizer. Only with {@link AutoContextProfile#IMPROVED}; the server
     * rejects it with {@link RemoteMemoryException.InvalidArgument} otherwise.
     */
    CL100K
}
