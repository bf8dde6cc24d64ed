package dev.agentscopememory.agentscope1;

import dev.agentscopememory.agentscope1.internal.MsgConverter;
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
 * An AgentScope {@link LongTermMemory} kept by an agentscope-memory server (mem0 on the server),
 * scoped like {@code Mem0LongTermMemory} by agent name, user id and run name.
 *
 * <p>Give it to {@code ReActAgent.builder().longTermMemory(...)} with any {@code
 * LongTermMemoryMode}: in {@code STATIC_CONTROL} and {@code BOTH} AgentScope's static hook
 * retrieves before each call and records after it; in {@code AGENT_CONTROL} and {@code BOTH}
 * AgentScope's {@code recordToMemory}/{@code retrieveFromMemory} tools call {@link #record} and
 * {@link #retrieve}. Calls run on Reactor's bounded-elastic scheduler; failures are signalled as
 * {@link RemoteMemoryException}s (AgentScope's hook logs them, its tools report them to the model).
 * The calls themselves are core's, shared with the AgentScope-Java 2.x build of this class.
 */
public final class RemoteLongTermMemory implements LongTermMemory, AutoCloseable {

    private final LongTermCalls calls;
    private final Scope scope;

    private RemoteLongTermMemory(Builder b) {
        // The server's id rules and message, before any connection is opened.
        scope = b.scope();
        // The codec's own error for a value it cannot write says only "Failed to serialize
        // object to JSON": core's message says where in the metadata and why.
        calls = new LongTermCalls(b, MetadataJson.write(b.metadataValues(), JsonUtils.getJsonCodec()::toJson,
                JsonException.class), b.limitValue());
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Records the messages' text. What the server records of a message is its text (the top-level
     * text blocks, as {@code Mem0LongTermMemory} sends), so only that travels: messages without
     * text (tool calls and results, images alone, null) are left out and other blocks (images,
     * audio, thinking) and metadata stay behind, so a conversation holding large images can still
     * be recorded. In {@code STATIC_CONTROL} AgentScope records the whole memory after every call:
     * the messages go in calls of at most {@value LongTermCalls#RECORD_BATCH_MESSAGES}, each stored on its own
     * (a failure stops the rest and is signalled). Nothing to record makes no call.
     */
    @Override
    public Mono<Void> record(List<Msg> msgs) {
        return calls.record(scope, msgs, RemoteLongTermMemory::text);
    }

    /** What the server records of {@code m}: see {@link LongTermCalls#textMessage}. */
    static dev.agentscopememory.grpc.v1.Msg text(Msg m) {
        return LongTermCalls.textMessage(m.getId(), m.getName(), m.getRole() == null ? null : m.getRole().name(),
                m.getTimestamp(), m.getContentBlocks(TextBlock.class).stream().map(TextBlock::getText).toList());
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
        return calls.retrieve(scope, () -> MsgConverter.toProto(msg));
    }

    /** Deletes every memory of this scope (a user asking to be forgotten); returns how many. */
    public long deleteScope() {
        return calls.deleteScope(scope);
    }

    /** Closes the connection if this object created it. */
    @Override
    public void close() {
        calls.close();
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
