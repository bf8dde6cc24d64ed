package dev.agentscopememory.agentscope1;

import dev.agentscopememory.agentscope1.internal.MsgConverter;
import dev.agentscopememory.client.Ids;
import dev.agentscopememory.client.internal.Utf16;
import dev.agentscopememory.client.ConnectionOptions;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.grpc.v1.DeleteScopeRequest;
import dev.agentscopememory.grpc.v1.RecordRequest;
import dev.agentscopememory.grpc.v1.RetrieveRequest;
import dev.agentscopememory.grpc.v1.Scope;
import io.agentscope.core.memory.LongTermMemory;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.util.JsonUtils;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

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
 */
public final class RemoteLongTermMemory implements LongTermMemory, AutoCloseable {

    private final RemoteConnection connection;
    private final boolean ownsConnection;
    private final Scope scope;
    private final String metadataJson;
    private final int limit;

    private RemoteLongTermMemory(Builder b) {
        if (b.agentName == null && b.userId == null && b.runName == null) {
            throw new IllegalArgumentException(
                    "At least one of agentName, userId, or runName must be provided");
        }
        // The server's id rules and message, before any connection is opened.
        if (b.agentName != null && !b.agentName.isEmpty()) {
            Ids.checkId(b.agentName, "scope.agent_name");
        }
        if (b.userId != null && !b.userId.isEmpty()) {
            Ids.checkId(b.userId, "scope.user_id");
        }
        if (b.runName != null && !b.runName.isEmpty()) {
            Ids.checkId(b.runName, "scope.run_name");
        }
        // protobuf would send '?' for half a surrogate pair in a metadata value or key.
        metadataJson = b.metadata.isEmpty() ? ""
                : Utf16.checkText(JsonUtils.getJsonCodec().toJson(b.metadata), "metadata_json");
        connection = b.connectionOrOpen();
        ownsConnection = !b.sharesConnection();
        Scope.Builder s = Scope.newBuilder();
        if (b.agentName != null) {
            s.setAgentName(b.agentName);
        }
        if (b.userId != null) {
            s.setUserId(b.userId);
        }
        if (b.runName != null) {
            s.setRunName(b.runName);
        }
        scope = s.build();
        limit = b.limit;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Messages per {@code Record} call: below the server's 1,000. */
    static final int RECORD_BATCH_MESSAGES = 500;

    /** Serialised bytes per {@code Record} call: well below the server's 64 MiB receive limit. */
    static final long RECORD_BATCH_BYTES = 8L * 1024 * 1024;

    /**
     * Records the messages' text. What the server records of a message is its text (the top-level
     * text blocks, as {@code Mem0LongTermMemory} sends), so only that travels: messages without
     * text (tool calls and results, images alone, null) are left out and other blocks (images,
     * audio, thinking) and metadata stay behind, so a conversation holding large images can still
     * be recorded. In {@code STATIC_CONTROL} AgentScope records the whole memory after every call:
     * the messages go in calls of at most {@value #RECORD_BATCH_MESSAGES}, each stored on its own
     * (a failure stops the rest and is signalled). Nothing to record makes no call.
     */
    @Override
    public Mono<Void> record(List<Msg> msgs) {
        if (msgs == null || msgs.isEmpty()) {
            return Mono.empty();
        }
        List<Msg> kept = new ArrayList<>(msgs.size());
        for (Msg m : msgs) {
            Msg text = textOnly(m);
            if (text != null) {
                kept.add(text);
            }
        }
        if (kept.isEmpty()) {
            return Mono.empty();
        }
        return Mono.<Void>fromRunnable(() -> {
                    List<dev.agentscopememory.grpc.v1.Msg> batch = new ArrayList<>();
                    long bytes = 0;
                    for (Msg m : kept) {
                        dev.agentscopememory.grpc.v1.Msg p = MsgConverter.toProto(m);
                        if (!batch.isEmpty() && (batch.size() >= RECORD_BATCH_MESSAGES
                                || bytes + p.getSerializedSize() > RECORD_BATCH_BYTES)) {
                            recordBatch(batch);
                            batch = new ArrayList<>();
                            bytes = 0;
                        }
                        batch.add(p);
                        bytes += p.getSerializedSize();
                    }
                    recordBatch(batch);
                })
                .subscribeOn(Schedulers.boundedElastic());
    }

    private void recordBatch(List<dev.agentscopememory.grpc.v1.Msg> batch) {
        RecordRequest request = RecordRequest.newBuilder()
                .setScope(scope)
                .addAllMessages(batch)
                .setMetadataJson(metadataJson)
                .build();
        // Not retried: a replayed record could store the facts twice.
        connection.call("LongTermMemoryService/Record", false,
                () -> connection.longTermMemoryService().record(request));
    }

    /**
     * The part of {@code m} the server records (its id, name, role, timestamp and top-level text
     * blocks), or null when it has no text the server would record (none, or only whitespace).
     */
    private static Msg textOnly(Msg m) {
        if (m == null) {
            return null;
        }
        String text = m.getTextContent();
        if (text == null || text.isBlank()) {
            return null;
        }
        List<ContentBlock> texts = new ArrayList<>();
        for (ContentBlock block : m.getContent()) {
            if (block instanceof TextBlock) {
                texts.add(block);
            }
        }
        return Msg.builder().id(m.getId()).name(m.getName()).role(m.getRole()).timestamp(m.getTimestamp())
                .content(texts).build();
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
        return Mono.fromCallable(() -> {
                    RetrieveRequest request = RetrieveRequest.newBuilder()
                            .setScope(scope)
                            .setMessage(MsgConverter.toProto(msg))
                            .setLimit(limit)
                            .build();
                    return connection.call("LongTermMemoryService/Retrieve", true,
                            () -> connection.longTermMemoryService().retrieve(request)).getText();
                })
                .subscribeOn(Schedulers.boundedElastic());
    }

    /** Deletes every memory of this scope (a user asking to be forgotten); returns how many. */
    public long deleteScope() {
        DeleteScopeRequest request = DeleteScopeRequest.newBuilder().setScope(scope).build();
        return connection.call("LongTermMemoryService/DeleteScope", true,
                () -> connection.longTermMemoryService().deleteScope(request)).getDeletedCount();
    }

    /** Closes the connection if this object created it. */
    @Override
    public void close() {
        if (ownsConnection) {
            connection.close();
        }
    }

    /** Builder of {@link RemoteLongTermMemory}; at least one of the three scope ids is required. */
    public static final class Builder extends ConnectionOptions<Builder> {
        private String agentName;
        private String userId;
        private String runName;
        private final Map<String, Object> metadata = new LinkedHashMap<>();
        private int limit;

        private Builder() {}

        /** The agent's name (mem0 {@code agent_id}), as in {@code Mem0LongTermMemory}. */
        public Builder agentName(String agentName) {
            this.agentName = agentName;
            return this;
        }

        /** The user's id (mem0 {@code user_id}). */
        public Builder userId(String userId) {
            this.userId = userId;
            return this;
        }

        /** The run's name (mem0 {@code run_id}). */
        public Builder runName(String runName) {
            this.runName = runName;
            return this;
        }

        /** Metadata stored with every recorded memory. */
        public Builder metadata(Map<String, Object> metadata) {
            this.metadata.clear();
            if (metadata != null) {
                this.metadata.putAll(metadata);
            }
            return this;
        }

        /** How many memories a retrieve returns at most; 0 (default) means the server's 5. */
        public Builder limit(int limit) {
            if (limit < 0) {
                throw new IllegalArgumentException("limit: must not be negative");
            }
            this.limit = limit;
            return this;
        }

        public RemoteLongTermMemory build() {
            return new RemoteLongTermMemory(this);
        }
    }
}
