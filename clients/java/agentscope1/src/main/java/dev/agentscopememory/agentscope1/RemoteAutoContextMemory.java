package dev.agentscopememory.agentscope1;

import dev.agentscopememory.agentscope1.internal.MsgConverter;
import dev.agentscopememory.client.AutoContextProfile;
import dev.agentscopememory.client.MemoryKind;
import dev.agentscopememory.client.PagedRead;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.RemoteState;
import dev.agentscopememory.client.TokenCounter;
import dev.agentscopememory.client.internal.WireEnums;
import dev.agentscopememory.grpc.v1.AttachPlanNoteRequest;
import dev.agentscopememory.grpc.v1.CompressIfNeededRequest;
import dev.agentscopememory.grpc.v1.GetInteractionMessagesRequest;
import dev.agentscopememory.grpc.v1.GetInteractionMessagesResponse;
import dev.agentscopememory.grpc.v1.GetOriginalMessagesRequest;
import dev.agentscopememory.grpc.v1.GetOriginalMessagesResponse;
import dev.agentscopememory.grpc.v1.JsonList;
import dev.agentscopememory.grpc.v1.ListCompressionEventsRequest;
import dev.agentscopememory.grpc.v1.ListCompressionEventsResponse;
import dev.agentscopememory.grpc.v1.PlanNote;
import dev.agentscopememory.grpc.v1.PlanSubtask;
import dev.agentscopememory.grpc.v1.PrepareReasoningInputRequest;
import dev.agentscopememory.grpc.v1.PrepareReasoningInputResponse;
import dev.agentscopememory.grpc.v1.ReloadContextRequest;
import dev.agentscopememory.grpc.v1.ReloadContextResponse;
import dev.agentscopememory.grpc.v1.StateEntry;
import dev.agentscopememory.grpc.v1.WatchCompressionEventsRequest;
import dev.agentscopememory.grpc.v1.WatchCompressionEventsResponse;
import io.agentscope.core.memory.autocontext.AutoContextConfig;
import io.agentscope.core.memory.autocontext.CompressionEvent;
import io.agentscope.core.memory.autocontext.OffloadContextState;
import io.agentscope.core.memory.autocontext.PromptConfig;
import io.agentscope.core.message.Msg;
import io.agentscope.core.plan.PlanNotebook;
import io.agentscope.core.plan.model.Plan;
import io.agentscope.core.plan.model.SubTask;
import io.agentscope.core.session.Session;
import io.agentscope.core.state.SessionKey;
import io.agentscope.core.state.State;
import io.agentscope.core.util.JsonUtils;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.publisher.Flux;
import reactor.core.scheduler.Schedulers;

/**
 * AgentScope's {@code AutoContextMemory} kept by an agentscope-memory server (a memory of kind
 * {@code AUTO_CONTEXT}): {@link #getMessages()} returns the working (possibly compressed)
 * messages, the server keeps the original history, the offloaded context and the compression
 * events, and runs the compression strategies with its configured summariser.
 *
 * <p>Use it with {@link RemoteAutoContextHook} (registered on the agent), which compresses before
 * every reasoning step and registers the {@code context_reload} tool, as AgentScope's
 * {@code AutoContextHook} does for the local memory. {@link #saveTo}/{@link #loadFrom} use the
 * {@code autoContextMemory_*} session keys and JSON of {@code AutoContextMemory}.
 */
public class RemoteAutoContextMemory extends AbstractRemoteMemory {

    /** Ends each compression watch open now (see {@link #watchCompressionEvents}); run by {@link #close()}. */
    private final Set<Runnable> openWatches = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    /** Session keys of {@code AutoContextMemory}. */
    public static final String WORKING_KEY = "autoContextMemory_workingMessages";

    public static final String ORIGINAL_KEY = "autoContextMemory_originalMessages";
    public static final String OFFLOAD_KEY = "autoContextMemory_offloadContext";
    public static final String EVENTS_KEY = "autoContextMemory_compressionEvents";

    protected RemoteAutoContextMemory(Builder b) {
        super(b, MemoryKind.AUTO_CONTEXT, toProto(b.config, b.profile, b.tokenCounter));
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The wire form of an AgentScope {@code AutoContextConfig} (every field sent explicitly). */
    static dev.agentscopememory.grpc.v1.AutoContextConfig toProto(
            AutoContextConfig c, AutoContextProfile profile, TokenCounter tokenCounter) {
        dev.agentscopememory.grpc.v1.AutoContextConfig.Builder out =
                dev.agentscopememory.grpc.v1.AutoContextConfig.newBuilder()
                        .setMsgThreshold(c.getMsgThreshold())
                        .setMaxToken(c.getMaxToken())
                        .setTokenRatio(c.getTokenRatio())
                        .setLastKeep(c.getLastKeep())
                        .setLargePayloadThreshold(c.getLargePayloadThreshold())
                        .setOffloadSinglePreview(c.getOffloadSinglePreview())
                        .setMinConsecutiveToolMessages(c.getMinConsecutiveToolMessages())
                        .setCurrentRoundCompressionRatio(c.getCurrentRoundCompressionRatio())
                        .setMinCompressionTokenThreshold(c.getMinCompressionTokenThreshold())
                        .setProfile(WireEnums.toProto(profile))
                        .setTokenCounter(WireEnums.toProto(tokenCounter));
        PromptConfig p = c.getCustomPrompt();
        if (p != null) {
            dev.agentscopememory.grpc.v1.PromptConfig.Builder pb = dev.agentscopememory.grpc.v1.PromptConfig.newBuilder();
            if (p.getPreviousRoundToolCompressPrompt() != null) {
                pb.setPreviousRoundToolCompressPrompt(p.getPreviousRoundToolCompressPrompt());
            }
            if (p.getPreviousRoundSummaryPrompt() != null) {
                pb.setPreviousRoundSummaryPrompt(p.getPreviousRoundSummaryPrompt());
            }
            if (p.getCurrentRoundLargeMessagePrompt() != null) {
                pb.setCurrentRoundLargeMessagePrompt(p.getCurrentRoundLargeMessagePrompt());
            }
            if (p.getCurrentRoundCompressPrompt() != null) {
                pb.setCurrentRoundCompressPrompt(p.getCurrentRoundCompressPrompt());
            }
            out.setCustomPrompt(pb);
        }
        return out.build();
    }

    /** Runs AgentScope's trigger and the first strategy that changes something; true if one did. */
    public boolean compressIfNeeded() {
        ensureMemory();
        CompressIfNeededRequest request = CompressIfNeededRequest.newBuilder().setMemoryId(memoryId).build();
        // Not retried: a replay after a lost reply could compress a second time.
        return call("MemoryService/CompressIfNeeded", false,
                () -> connection.memoryService().compressIfNeeded(request)).getCompressed();
    }

    /**
     * Compresses if needed, then returns what {@code AutoContextHook} hands the model: the system
     * message (the prompt, when given, followed by the offload instruction) and the working
     * messages.
     */
    public List<Msg> prepareReasoningInput(String systemPrompt) {
        PrepareReasoningInputRequest.Builder request = PrepareReasoningInputRequest.newBuilder().setMemoryId(memoryId);
        if (systemPrompt != null) {
            request.setSystemPrompt(systemPrompt);
        }
        return prepareReasoningInput(request.build());
    }

    /**
     * As {@link #prepareReasoningInput(String)}, from the agent's own system message: like {@code
     * AutoContextHook}, the server keeps its name and metadata and appends the offload
     * instruction to its text. {@code null} means the agent input has no system message.
     */
    public List<Msg> prepareReasoningInput(Msg systemMessage) {
        PrepareReasoningInputRequest.Builder request = PrepareReasoningInputRequest.newBuilder().setMemoryId(memoryId);
        if (systemMessage != null) {
            request.setSystemMessage(MsgConverter.toProto(systemMessage));
        }
        return prepareReasoningInput(request.build());
    }

    private List<Msg> prepareReasoningInput(PrepareReasoningInputRequest request) {
        ensureMemory();
        // The first page compresses (not retried: a compression is not idempotent); later pages
        // read the state it left. A change between pages aborts, and the whole call starts again.
        for (int attempt = 1; ; attempt++) {
            List<dev.agentscopememory.grpc.v1.Msg> wire = new ArrayList<>();
            String token = "";
            try {
                do {
                    PrepareReasoningInputRequest built = request.toBuilder().setPageToken(token).build();
                    PrepareReasoningInputResponse page = call("MemoryService/PrepareReasoningInput",
                            !token.isEmpty(), () -> connection.memoryService().prepareReasoningInput(built));
                    wire.addAll(page.getMessagesList());
                    token = page.getNextPageToken();
                } while (!token.isEmpty());
                return MsgConverter.fromProto(wire);
            } catch (RemoteMemoryException.Aborted e) {
                if (attempt >= PagedRead.CONSISTENT_READ_ATTEMPTS) {
                    throw e;
                }
            }
        }
    }

    /**
     * The uncompressed, append-only history (a new list), read page by page as one state of the
     * memory (see {@link PagedRead}), so it works at any size through a 4 MiB channel.
     */
    public List<Msg> getOriginalMemoryMsgs() {
        ensureMemory();
        return MsgConverter.fromProto(PagedRead.readAll(token -> {
            GetOriginalMessagesRequest request = GetOriginalMessagesRequest.newBuilder()
                    .setMemoryId(memoryId).setPageToken(token).build();
            GetOriginalMessagesResponse page = call("MemoryService/GetOriginalMessages", true,
                    () -> connection.memoryService().getOriginalMessages(request));
            return new PagedRead.Page<>(page.getMessagesList(), page.getNextPageToken());
        }));
    }

    /** The user messages and final assistant responses of the original history. */
    public List<Msg> getInteractionMsgs() {
        ensureMemory();
        return MsgConverter.fromProto(PagedRead.readAll(token -> {
            GetInteractionMessagesRequest request = GetInteractionMessagesRequest.newBuilder()
                    .setMemoryId(memoryId).setPageToken(token).build();
            GetInteractionMessagesResponse page = call("MemoryService/GetInteractionMessages", true,
                    () -> connection.memoryService().getInteractionMessages(request));
            return new PagedRead.Page<>(page.getMessagesList(), page.getNextPageToken());
        }));
    }

    /** The messages offloaded under {@code uuid}, or an empty list if there are none. */
    public List<Msg> reload(String uuid) {
        ReloadContextResponse response = reloadContext(uuid);
        return response.getFound() ? MsgConverter.fromProto(response.getMessagesList()) : new ArrayList<>();
    }

    /** Every page of the offloaded messages, as one response ({@code found} from the first page). */
    ReloadContextResponse reloadContext(String uuid) {
        ensureMemory();
        boolean[] found = new boolean[1];
        List<dev.agentscopememory.grpc.v1.Msg> messages = PagedRead.readAll(token -> {
            ReloadContextRequest request = ReloadContextRequest.newBuilder()
                    .setMemoryId(memoryId).setWorkingContextOffloadUuid(uuid).setPageToken(token).build();
            ReloadContextResponse page = call("MemoryService/ReloadContext", true,
                    () -> connection.memoryService().reloadContext(request));
            if (token.isEmpty()) {
                found[0] = page.getFound();
            }
            return new PagedRead.Page<>(page.getMessagesList(), page.getNextPageToken());
        });
        return ReloadContextResponse.newBuilder().addAllMessages(messages).setFound(found[0]).build();
    }

    /** The compression events recorded so far, as AgentScope's {@code CompressionEvent}s. */
    public List<CompressionEvent> getCompressionEvents() {
        ensureMemory();
        List<CompressionEvent> out = new ArrayList<>();
        for (dev.agentscopememory.grpc.v1.CompressionEvent e : PagedRead.readAll(token -> {
            ListCompressionEventsRequest request = ListCompressionEventsRequest.newBuilder()
                    .setMemoryId(memoryId).setPageToken(token).build();
            ListCompressionEventsResponse page = call("MemoryService/ListCompressionEvents", true,
                    () -> connection.memoryService().listCompressionEvents(request));
            return new PagedRead.Page<>(page.getEventsList(), page.getNextPageToken());
        })) {
            out.add(toEvent(e));
        }
        return out;
    }

    /**
     * The compression events as the server records them: first those with a sequence above {@code
     * afterSequence} (0 replays all), then each new one as it is recorded, also when another
     * client or server replica compresses. The stream runs until the subscriber cancels (which
     * cancels the call), the memory is closed (it completes), or it fails with a {@link
     * RemoteMemoryException} (e.g. {@code FailedPrecondition} for a memory of another kind, {@code
     * Unavailable} when the server goes away). Events arrive on gRPC's threads.
     */
    public Flux<SequencedCompressionEvent> watchCompressionEvents(long afterSequence) {
        if (afterSequence < 0) {
            throw new IllegalArgumentException("afterSequence: must not be negative");
        }
        String operation = "MemoryService/WatchCompressionEvents";
        return Flux.<SequencedCompressionEvent>create(sink -> {
            AtomicReference<ClientCallStreamObserver<WatchCompressionEventsRequest>> call = new AtomicReference<>();
            AtomicBoolean ended = new AtomicBoolean();
            // close() ends the watch: its subscriber completes, and the call is cancelled rather
            // than left holding the channel's shutdown.
            Runnable end = () -> {
                if (ended.compareAndSet(false, true)) {
                    sink.complete();
                }
            };
            openWatches.add(end);
            sink.onDispose(() -> {
                openWatches.remove(end);
                ClientCallStreamObserver<WatchCompressionEventsRequest> started = call.get();
                if (started != null) {
                    started.cancel(ended.get() ? "the memory was closed" : "the subscriber cancelled", null);
                }
            });
            if (closed) {
                end.run();
                return;
            }
            try {
                ensureMemory();
            } catch (RemoteMemoryException e) {
                sink.error(e);
                return;
            }
            WatchCompressionEventsRequest request = WatchCompressionEventsRequest.newBuilder()
                    .setMemoryId(memoryId).setAfterSequence(afterSequence).build();
            connection.memoryServiceAsync().watchCompressionEvents(request,
                    new ClientResponseObserver<WatchCompressionEventsRequest, WatchCompressionEventsResponse>() {
                        @Override
                        public void beforeStart(ClientCallStreamObserver<WatchCompressionEventsRequest> started) {
                            call.set(started);
                            if (ended.get() || sink.isCancelled()) {
                                started.cancel("the watch ended before it started", null);
                            }
                        }

                        @Override
                        public void onNext(WatchCompressionEventsResponse response) {
                            sink.next(new SequencedCompressionEvent(
                                    response.getEvent().getSequence(), toEvent(response.getEvent())));
                        }

                        @Override
                        public void onError(Throwable t) {
                            if (!sink.isCancelled() && !ended.get()) {
                                sink.error(RemoteMemoryException.of(operation, Status.fromThrowable(t).asRuntimeException()));
                            }
                        }

                        @Override
                        public void onCompleted() {
                            sink.complete();
                        }
                    });
        }).subscribeOn(Schedulers.boundedElastic());
    }

    private static CompressionEvent toEvent(dev.agentscopememory.grpc.v1.CompressionEvent e) {
        Map<String, Object> metadata = e.getMetadataJson().isEmpty() ? Map.of() : MsgConverter.codecMap(e.getMetadataJson());
        return new CompressionEvent(e.getEventType(), e.getTimestamp(), e.getCompressedMessageCount(),
                e.hasPreviousMessageId() ? e.getPreviousMessageId() : null,
                e.hasNextMessageId() ? e.getNextMessageId() : null,
                e.hasCompressedMessageId() ? e.getCompressedMessageId() : null,
                new HashMap<>(metadata));
    }

    /** Attaches the notebook's current plan for the plan-aware hint; null or no plan detaches. */
    public void attachPlanNote(PlanNotebook notebook) {
        ensureMemory();
        AttachPlanNoteRequest.Builder request = AttachPlanNoteRequest.newBuilder().setMemoryId(memoryId);
        Plan plan = notebook == null ? null : notebook.getCurrentPlan();
        if (plan != null) {
            PlanNote.Builder note = PlanNote.newBuilder()
                    .setName(orEmpty(plan.getName()))
                    .setDescription(orEmpty(plan.getDescription()))
                    .setExpectedOutcome(orEmpty(plan.getExpectedOutcome()))
                    .setState(plan.getState() == null ? "" : plan.getState().getValue());
            if (plan.getSubtasks() != null) {
                for (SubTask t : plan.getSubtasks()) {
                    note.addSubtasks(PlanSubtask.newBuilder()
                            .setName(orEmpty(t.getName()))
                            .setDescription(orEmpty(t.getDescription()))
                            .setExpectedOutcome(orEmpty(t.getExpectedOutcome()))
                            .setState(t.getState() == null ? "" : t.getState().getValue()));
                }
            }
            request.setPlan(note);
        }
        AttachPlanNoteRequest built = request.build();
        call("MemoryService/AttachPlanNote", true, () -> connection.memoryService().attachPlanNote(built));
    }

    /**
     * Ends the compression watches of this memory (their subscribers complete), then closes as
     * {@link AbstractRemoteMemory#close()} does.
     */
    @Override
    public void close() {
        closed = true;
        for (Runnable end : List.copyOf(openWatches)) {
            end.run();
        }
        super.close();
    }

    // ---------------------------------------------------------------- StateModule

    /**
     * Writes the {@code autoContextMemory_*} keys exactly as {@code AutoContextMemory} does: the
     * working and original lists always, the offload map and the events only when non-empty.
     */
    @Override
    public void saveTo(Session session, SessionKey sessionKey) {
        ensureMemory();
        // Streamed in pieces, so a state of any size passes a 4 MiB channel.
        flush();
        RemoteState.Saved state = RemoteState.save(connection, memoryId);
        for (StateEntry entry : state.entries()) {
            String key = entry.getKey();
            if (entry.hasList()) {
                Class<? extends State> type = EVENTS_KEY.equals(key) ? CompressionEvent.class : Msg.class;
                List<State> items = new ArrayList<>();
                for (String item : entry.getList().getItemsList()) {
                    items.add(JsonUtils.getJsonCodec().fromJson(item, type));
                }
                session.save(sessionKey, key, items);
            } else if (OFFLOAD_KEY.equals(key)) {
                session.save(sessionKey, key, JsonUtils.getJsonCodec().fromJson(entry.getJson(), OffloadContextState.class));
            } else {
                throw new IllegalStateException("SaveState returned an unexpected single entry: " + key);
            }
        }
    }

    /**
     * Replaces the memory's state with the {@code autoContextMemory_*} keys of the session, as
     * {@code AutoContextMemory.loadFrom} does (absent lists load as empty; an absent offload map
     * keeps the current one). The server applies it atomically. The loaded working messages
     * become this client's copy, named by the load's etag, so the next {@link #getMessages()}
     * does not read them back.
     */
    @Override
    public void loadFrom(Session session, SessionKey sessionKey) {
        List<StateEntry> entries = new ArrayList<>();
        List<Msg> working = session.getList(sessionKey, WORKING_KEY, Msg.class);
        entries.add(listEntry(WORKING_KEY, working));
        entries.add(listEntry(ORIGINAL_KEY, session.getList(sessionKey, ORIGINAL_KEY, Msg.class)));
        entries.add(listEntry(EVENTS_KEY, session.getList(sessionKey, EVENTS_KEY, CompressionEvent.class)));
        Optional<OffloadContextState> offload = session.get(sessionKey, OFFLOAD_KEY, OffloadContextState.class);
        offload.ifPresent(o -> entries.add(StateEntry.newBuilder().setKey(OFFLOAD_KEY)
                .setJson(MsgConverter.stateJson(o, OFFLOAD_KEY)).build()));
        // Streamed in pieces, so a state of any size passes a 4 MiB channel.
        loadState(entries, working.stream().filter(Objects::nonNull).toList());
    }

    private static StateEntry listEntry(String key, List<? extends State> items) {
        JsonList.Builder list = JsonList.newBuilder();
        for (int i = 0; i < items.size(); i++) {
            if (items.get(i) != null) {
                list.addItems(MsgConverter.stateJson(items.get(i), key + "[" + i + "]"));
            }
        }
        return StateEntry.newBuilder().setKey(key).setList(list).build();
    }

    private static String orEmpty(String s) {
        return s == null ? "" : s;
    }

    /** Builder of {@link RemoteAutoContextMemory}. */
    public static final class Builder extends AbstractBuilder<Builder> {
        private AutoContextConfig config = AutoContextConfig.builder().build();
        private AutoContextProfile profile = AutoContextProfile.PARITY;
        private TokenCounter tokenCounter = TokenCounter.JAVA_ESTIMATE;

        private Builder() {}

        /** AgentScope's configuration (defaults: AgentScope's). Used when this client creates the memory. */
        public Builder config(AutoContextConfig config) {
            this.config = config == null ? AutoContextConfig.builder().build() : config;
            return this;
        }

        /**
         * {@link AutoContextProfile#PARITY}, AgentScope 1.0.12's exact behaviour (default), or
         * {@link AutoContextProfile#IMPROVED}, the server's fixes of its known bugs. Used when this
         * client creates the memory.
         */
        public Builder profile(AutoContextProfile profile) {
            this.profile = Objects.requireNonNull(profile, "profile");
            return this;
        }

        /**
         * {@link TokenCounter#JAVA_ESTIMATE}, AgentScope's estimate (default), or {@link
         * TokenCounter#CL100K}, which the server accepts with the improved profile only. Used when
         * this client creates the memory.
         */
        public Builder tokenCounter(TokenCounter tokenCounter) {
            this.tokenCounter = Objects.requireNonNull(tokenCounter, "tokenCounter");
            return this;
        }

        public RemoteAutoContextMemory build() {
            return new RemoteAutoContextMemory(this);
        }
    }
}
