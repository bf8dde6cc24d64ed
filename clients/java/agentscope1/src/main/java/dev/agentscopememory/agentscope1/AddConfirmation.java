package dev.agentscopememory.agentscope1;

/**
 * When a remote memory's {@code addMessage} waits for the server to confirm that the add is
 * stored (the builder's {@code addConfirmation}). Adds that do not wait travel over the memory's
 * watch stream (coherent caching) and are confirmed in the background, in the order sent; without
 * an open watch every add waits.
 *
 * <p>An add that does not wait is held back for a moment (at most 2 ms) and goes out with the add
 * after it, as one request, when one follows that soon; refused as one, they are sent again one by
 * one, so each is stored or fails as it would have alone.
 *
 * <p>Whatever the choice, a confirmed add is durable, another client sees an add only once it is
 * stored, {@link AbstractRemoteMemory#flush()} waits for every add made before it, and every other
 * call that reaches the server, {@link AbstractRemoteMemory#close()} and the JVM's exit flush
 * first. What differs is which call throws a failed add's exception.
 */
public enum AddConfirmation {

    /** Every add waits for its confirmation and throws its own failure. */
    EVERY_ADD,

    /**
     * The default. An add of the model's output (a message with role {@code ASSISTANT}: tool calls
     * or a reply) waits until it and every add before it are confirmed, and throws the first
     * failure among them; other adds (the user's input, tool results) go ahead without waiting.
     * In a {@code ReActAgent} this means no tool runs before its call is stored, and the agent's
     * {@code call()} returns its reply only once the whole turn is stored, and fails otherwise,
     * just as with {@link #EVERY_ADD}, at a fraction of the waiting.
     */
    MODEL_OUTPUT,

    /**
     * No add waits: a failure is thrown by the memory's next call, or by {@link
     * AbstractRemoteMemory#flush()}. An add that returned may not be stored yet, so a tool can
     * run, or a reply be returned, before what led to it is stored. For bulk imports and for
     * callers that flush themselves.
     */
    ON_FLUSH
}
