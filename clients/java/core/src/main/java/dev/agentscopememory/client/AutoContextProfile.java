package dev.agentscopememory.client;

/**
 * How a server-side AutoContext memory behaves where AgentScope-Java 1.0.12's {@code
 * AutoContextMemory} has known bugs. Chosen when the memory is created and kept by the server.
 */
public enum AutoContextProfile {

    /**
     * Exactly AgentScope-Java 1.0.12, its known bugs included: the default, so that a memory
     * ported from AgentScope behaves as it did unless {@link #IMPROVED} is asked for.
     */
    PARITY,

    /**
     * Recommended. The server's fixes: offload only after the summariser call succeeded, never
     * split a tool call from its result, never offload an offload stub again; and far fewer
     * summariser calls (earlier rounds rolled up in one call, unread tool results never
     * compressed, checks that cannot change anything skipped).
     */
    IMPROVED
}
