package dev.agentscopememory.agentscope2;

import dev.agentscopememory.client.LongTermOptions;
import dev.agentscopememory.client.LongTermScopeOptions;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.internal.LongTermCalls;
import dev.agentscopememory.client.internal.MetadataJson;
import dev.agentscopememory.grpc.v1.Scope;
import io.agentscope.core.memory.LongTermMemory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.util.JsonException;
import io.agentscope.core.util.JsonUtils;
import java.util.List;
import reactor.core.publisher.Mono;

/**
 * An AgentScope-Java 2.x {@link LongTermMemory} kept by an agentscope-memory server, scoped like
 * {@code Mem0LongTermMemory} by agent name, user id and run name: the 2.x build of {@code
 * dev.agentscopememory.agentscope1.RemoteLongTermMemory}, with the same builder, scope rules,
 * RPCs, result texts and errors (both make their calls through core's {@code LongTermCalls}).
 *
 * <p>Give it to the (deprecated in 2.0.0, still working) {@code ReActAgent.builder()
 * .longTermMemory(...).longTermMemoryMode(...)}: in {@code AGENT_CONTROL} and {@code BOTH}
 * AgentScope's {@code recordToMemory}/{@code retrieveFromMemory} tools call {@link #record} and
 * {@link #retrieve}. Its scope is fixed, so one instance serves one user. {@code STATIC_CONTROL}
 * works with the default session only: AgentScope 2.0.0's static hook records the default
 * session's conversation whatever the call's {@code RuntimeContext} says; for per-call users and
 * sessions use {@link RemoteLongTermMemoryMiddleware} instead. Calls run on Reactor's
 * bounded-elastic scheduler; failures are signalled as {@link RemoteMemoryException}s.
 */
public final class RemoteLongTermMemory implements LongTermMemory, AutoCloseable {

    private final LongTermCalls calls;
    private final Scope scope;
    private final boolean ownsCalls;

    private RemoteLongTermMemory(Builder b) {
        // The server's id rules and message, before any connection is opened.
        scope = b.scope();
        calls = new LongTermCalls(b, metadataJson(b), b.limitValue());
        ownsCalls = true;
    }

    /**
     * One scope of calls someone else owns (and closes): the middleware's memory for one call, so
     * its static retrieve and record and its tools act exactly as this class does.
     */
    RemoteLongTermMemory(LongTermCalls calls, Scope scope) {
        this.calls = calls;
        this.scope = scope;
        ownsCalls = false;
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Records the messages' text (their top-level text blocks, as {@code Mem0LongTermMemory}
     * sends): messages without text are left out, other blocks and metadata stay behind; at most
     * {@value LongTermCalls#RECORD_BATCH_MESSAGES} messages a call. Nothing to record makes no call.
     */
    @Override
    public Mono<Void> record(List<Msg> msgs) {
        return calls.record(scope, msgs, RemoteLongTermMemory::text);
    }

    /**
     * The memories relevant to the message's text, joined with newlines; {@code ""} when none, or
     * when the message is null or has no text (no call is made then).
     */
    @Override
    public Mono<String> retrieve(Msg msg) {
        if (msg == null || msg.getTextContent() == null || msg.getTextContent().isEmpty()) {
            return Mono.just("");
        }
        return calls.retrieve(scope, () -> text(msg));
    }

    /** Deletes every memory of this scope (a user asking to be forgotten); returns how many. */
    public long deleteScope() {
        return calls.deleteScope(scope);
    }

    /** Closes the connection if this object created it. */
    @Override
    public void close() {
        if (ownsCalls) {
            calls.close();
        }
    }

    /**
     * The builder's metadata as the JSON AgentScope's codec writes, {@code ""} when none.
     *
     * @throws IllegalArgumentException when the codec cannot write a value, naming where in the
     *     metadata it is and why (the codec's own error says only "Failed to serialize object to
     *     JSON")
     */
    static String metadataJson(LongTermOptions<?> b) {
        return MetadataJson.write(b.metadataValues(), JsonUtils.getJsonCodec()::toJson, JsonException.class);
    }

    /** What the server reads of {@code m}: see {@link LongTermCalls#textMessage}. */
    static dev.agentscopememory.grpc.v1.Msg text(Msg m) {
        return LongTermCalls.textMessage(m.getId(), m.getName(), m.getRole() == null ? null : m.getRole().name(),
                m.getTimestamp(), m.getContentBlocks(TextBlock.class).stream().map(TextBlock::getText).toList());
    }

    /**
     * Builder of {@link RemoteLongTermMemory}; at least one of the three scope ids ({@code
     * agentName}, {@code userId}, {@code runName}) is required. Also {@code metadata} and {@code
     * limit}, and the connection options.
     */
    public static final class Builder extends LongTermScopeOptions<Builder> {
        private Builder() {}

        /**
         * The memory, on its own connection (or the one given).
         *
         * @throws IllegalArgumentException when no scope id is given, an id or the metadata breaks
         *     the server's rules, or AgentScope's codec cannot write a metadata value (the message
         *     says where in the metadata and why)
         */
        public RemoteLongTermMemory build() {
            return new RemoteLongTermMemory(this);
        }
    }
}
