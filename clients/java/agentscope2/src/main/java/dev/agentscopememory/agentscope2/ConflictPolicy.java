package dev.agentscopememory.agentscope2;

/**
 * What {@link RemoteAgentStateStore#save(String, String, String, io.agentscope.core.state.State)}
 * does when the stored value is no longer the version this process last read.
 *
 * <p>A 2.0 {@code ReActAgent} reads its state with {@code get} at the start of a call and writes
 * it with {@code save} at the end, never calling the versioning methods. The store therefore
 * remembers the version each {@code get} returned (per returned object, so concurrent calls on one
 * slot do not mix) and checks it when that object is saved; a new state saved after a {@code get}
 * that found nothing is checked as a create (version 0).
 */
public enum ConflictPolicy {

    /**
     * The last save wins, as with AgentScope's own stores: a turn another replica saved meanwhile
     * is lost. No check, no extra read.
     */
    OVERWRITE,

    /**
     * A save against a moved version (or, over a stored state, one not preceded by a successful
     * {@code get} of the slot) throws {@link ConcurrentStateModificationException}; nothing is written. The caller of {@code
     * agent.call(...)} sees the exception and can retry the turn.
     */
    FAIL,

    /**
     * Like {@link #FAIL}, but an {@code AgentState} whose context only grew since it was read is
     * merged: the messages this call appended are appended to the stored state's context, the
     * other fields it changed since it was read (permission mode, tool groups, tasks, plan mode)
     * are set in it (where both writers changed one value, this save's wins), and the result is
     * saved against the stored version (retried a few times). Anything else (a compacted context,
     * another state type) fails as with {@link #FAIL}. The default.
     */
    MERGE_APPENDED
}
