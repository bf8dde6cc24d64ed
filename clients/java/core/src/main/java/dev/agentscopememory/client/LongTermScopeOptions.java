package dev.agentscopememory.client;

import dev.agentscopememory.client.internal.LongTermCalls;
import dev.agentscopememory.grpc.v1.Scope;

/**
 * The builder options of a long-term memory with one fixed scope (agent name, user id, run name,
 * as in {@code Mem0LongTermMemory}), shared by the {@code RemoteLongTermMemory} of both AgentScope
 * majors. As in {@code Mem0LongTermMemory}'s builder, a null id is one not given (so it undoes an
 * earlier one); {@link #scope} then needs at least one of the three.
 *
 * @param <B> the concrete builder, returned by every option for chaining
 */
@SuppressWarnings("unchecked")
public abstract class LongTermScopeOptions<B extends LongTermScopeOptions<B>> extends LongTermOptions<B> {
    private String agentName;
    private String userId;
    private String runName;

    protected LongTermScopeOptions() {}

    /** The agent's name (mem0 {@code agent_id}), as in {@code Mem0LongTermMemory}. */
    public B agentName(String agentName) {
        this.agentName = agentName;
        return (B) this;
    }

    /** The user's id (mem0 {@code user_id}). */
    public B userId(String userId) {
        this.userId = userId;
        return (B) this;
    }

    /** The run's name (mem0 {@code run_id}). */
    public B runName(String runName) {
        this.runName = runName;
        return (B) this;
    }

    /**
     * The scope given, checked by the server's id rules before any connection is opened.
     *
     * @throws IllegalArgumentException when no id is given or one breaks the rules
     */
    public Scope scope() {
        return LongTermCalls.scope(agentName, userId, runName);
    }
}
