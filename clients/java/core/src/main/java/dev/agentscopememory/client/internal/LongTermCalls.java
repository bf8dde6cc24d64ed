package dev.agentscopememory.client.internal;

import dev.agentscopememory.client.ConnectionOptions;
import dev.agentscopememory.client.Ids;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.grpc.v1.ContentBlock;
import dev.agentscopememory.grpc.v1.DeleteScopeRequest;
import dev.agentscopememory.grpc.v1.Msg;
import dev.agentscopememory.grpc.v1.RecordRequest;
import dev.agentscopememory.grpc.v1.RetrieveRequest;
import dev.agentscopememory.grpc.v1.Scope;
import dev.agentscopememory.grpc.v1.TextBlock;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The long-term memory RPCs ({@code Record}, {@code Retrieve}, {@code DeleteScope}) as the
 * AgentScope adapters make them, for both AgentScope majors: the scope rules, what a record sends
 * and in which batches, the retry choices. Not public API (it names generated types and may change
 * in any release): it is public only so the adapter modules share it, and they keep only the
 * mapping of their own AgentScope {@code Msg} onto {@link #textMessage}.
 */
public final class LongTermCalls implements AutoCloseable {

    /** Messages per {@code Record} call: below the server's 1,000. */
    public static final int RECORD_BATCH_MESSAGES = 500;

    /** Serialised bytes per {@code Record} call: well below the server's 64 MiB receive limit. */
    public static final long RECORD_BATCH_BYTES = 8L * 1024 * 1024;

    private final RemoteConnection connection;
    private final boolean ownsConnection;
    private final String metadataJson;
    private final int limit;

    /**
     * Checks the metadata, then opens (or shares) the connection the options name.
     *
     * @param options where the calls go: a shared connection (not closed by {@link #close}) or
     *     the options of one these calls open and own
     * @param metadataJson the metadata stored with each recorded memory, a JSON object or {@code ""}
     * @param limit the most memories a retrieve returns, 0 for the server's 5
     * @throws IllegalArgumentException when the metadata holds a lone surrogate, before any
     *     connection is opened
     */
    public LongTermCalls(ConnectionOptions<?> options, String metadataJson, int limit) {
        // protobuf would send '?' for half a surrogate pair in a metadata value or key.
        this.metadataJson = metadataJson.isEmpty() ? "" : Utf16.checkText(metadataJson, "metadata_json");
        this.limit = limit;
        this.connection = options.connectionOrOpen();
        this.ownsConnection = !options.sharesConnection();
    }

    /**
     * The scope of these ids (null or empty leaves one out), checked by the server's rules.
     *
     * @throws IllegalArgumentException when all three are null or empty (a scope of no id, which
     *     the server refuses at every call, is refused here, with AgentScope's own message) or one
     *     breaks the id rules
     */
    public static Scope scope(String agentName, String userId, String runName) {
        if (isNullOrEmpty(agentName) && isNullOrEmpty(userId) && isNullOrEmpty(runName)) {
            throw new IllegalArgumentException("At least one of agentName, userId, or runName must be provided");
        }
        Scope.Builder s = Scope.newBuilder();
        if (agentName != null && !agentName.isEmpty()) {
            s.setAgentName(Ids.checkId(agentName, "scope.agent_name"));
        }
        if (userId != null && !userId.isEmpty()) {
            s.setUserId(Ids.checkId(userId, "scope.user_id"));
        }
        if (runName != null && !runName.isEmpty()) {
            s.setRunName(Ids.checkId(runName, "scope.run_name"));
        }
        return s.build();
    }

    private static boolean isNullOrEmpty(String id) {
        return id == null || id.isEmpty();
    }

    /**
     * The part of a message the server reads: its id, name, role, timestamp and top-level texts
     * (as {@code Mem0LongTermMemory} sends). Images, audio, thinking, tool calls and metadata stay
     * behind, so a conversation holding large images can still be recorded.
     *
     * @param role the AgentScope role's name ({@code USER}, {@code ASSISTANT}, {@code SYSTEM},
     *     {@code TOOL}), or null
     * @throws IllegalArgumentException naming the field when a text holds a lone surrogate or the
     *     role is unknown
     */
    public static Msg textMessage(String id, String name, String role, String timestamp, List<String> texts) {
        Msg.Builder out = Msg.newBuilder().setRole(WireEnums.roleToProto(role));
        boolean recorded = false;
        for (int i = 0; i < texts.size(); i++) {
            String text = texts.get(i) == null ? "" : Utf16.checkText(texts.get(i), "content[" + i + "].text");
            recorded |= !text.isBlank();
            out.addContent(ContentBlock.newBuilder().setText(TextBlock.newBuilder().setText(text)));
        }
        if (!recorded) {
            // A record leaves it out, so nothing else of it is read: a broken name on a message
            // without text (a tool call's) must not stop the rest of the conversation.
            return out.build();
        }
        if (id != null) {
            out.setId(Utf16.checkText(id, "id"));
        }
        if (name != null) {
            out.setName(Utf16.checkText(name, "name"));
        }
        if (timestamp != null) {
            out.setTimestamp(Utf16.checkText(timestamp, "timestamp"));
        }
        return out.build();
    }

    /**
     * Records the text of {@code msgs} in {@code scope}, on Reactor's bounded-elastic scheduler.
     * {@code toText} maps a message onto {@link #textMessage}; it runs inside the returned {@code
     * Mono}, so a message it refuses is signalled there. Messages without text (none, or only
     * whitespace: tool calls and results, images alone, null) are left out. The messages go in calls
     * of at most {@value #RECORD_BATCH_MESSAGES} (and {@link #RECORD_BATCH_BYTES} bytes), each
     * stored on its own; a failure stops the rest and is signalled. Nothing to record makes no call.
     */
    public <M> Mono<Void> record(Scope scope, List<M> msgs, Function<M, Msg> toText) {
        if (msgs == null || msgs.isEmpty()) {
            return Mono.empty();
        }
        return Mono.<Void>fromRunnable(() -> {
                    List<Msg> batch = new ArrayList<>();
                    long bytes = 0;
                    for (M m : msgs) {
                        Msg p = m == null ? null : toText.apply(m);
                        if (p == null || !hasText(p)) {
                            continue;
                        }
                        if (!batch.isEmpty() && (batch.size() >= RECORD_BATCH_MESSAGES
                                || bytes + p.getSerializedSize() > RECORD_BATCH_BYTES)) {
                            recordBatch(scope, batch);
                            batch = new ArrayList<>();
                            bytes = 0;
                        }
                        batch.add(p);
                        bytes += p.getSerializedSize();
                    }
                    if (!batch.isEmpty()) {
                        recordBatch(scope, batch);
                    }
                })
                .subscribeOn(Schedulers.boundedElastic());
    }

    private static boolean hasText(Msg p) {
        for (ContentBlock block : p.getContentList()) {
            if (!block.getText().getText().isBlank()) {
                return true;
            }
        }
        return false;
    }

    private void recordBatch(Scope scope, List<Msg> batch) {
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
     * The memories of {@code scope} relevant to the query message's text, joined with newlines
     * ({@code ""} when none), on Reactor's bounded-elastic scheduler. {@code query} runs inside
     * the returned {@code Mono}; the caller leaves out a message without text (no call then).
     */
    public Mono<String> retrieve(Scope scope, Supplier<Msg> query) {
        return Mono.fromCallable(() -> {
                    RetrieveRequest request = RetrieveRequest.newBuilder()
                            .setScope(scope)
                            .setMessage(query.get())
                            .setLimit(limit)
                            .build();
                    return connection.call("LongTermMemoryService/Retrieve", true,
                            () -> connection.longTermMemoryService().retrieve(request)).getText();
                })
                .subscribeOn(Schedulers.boundedElastic());
    }

    /** Deletes every memory of {@code scope}; returns how many. */
    public long deleteScope(Scope scope) {
        DeleteScopeRequest request = DeleteScopeRequest.newBuilder().setScope(scope).build();
        return connection.call("LongTermMemoryService/DeleteScope", true,
                () -> connection.longTermMemoryService().deleteScope(request)).getDeletedCount();
    }

    /** Closes the connection if these calls own it. */
    @Override
    public void close() {
        if (ownsConnection) {
            connection.close();
        }
    }
}
