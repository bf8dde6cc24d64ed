package dev.agentscopememory.agentscope2;

import dev.agentscopememory.agentscope2.internal.MsgConverter;
import dev.agentscopememory.client.AutoContextConfig;
import dev.agentscopememory.client.AutoContextProfile;
import dev.agentscopememory.client.ConnectionOptions;
import dev.agentscopememory.client.Ids;
import dev.agentscopememory.client.MemoryKind;
import dev.agentscopememory.client.PagedRead;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TokenCounter;
import dev.agentscopememory.client.internal.AutoContextWire;
import dev.agentscopememory.client.internal.ContextReloadTexts;
import dev.agentscopememory.client.internal.WireEnums;
import dev.agentscopememory.grpc.v1.AddMessagesRequest;
import dev.agentscopememory.grpc.v1.AddMessagesResponse;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.GetMessagesRequest;
import dev.agentscopememory.grpc.v1.GetMessagesResponse;
import dev.agentscopememory.grpc.v1.PrepareReasoningInputRequest;
import dev.agentscopememory.grpc.v1.PrepareReasoningInputResponse;
import dev.agentscopememory.grpc.v1.ReloadContextRequest;
import dev.agentscopememory.grpc.v1.ReloadContextResponse;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.Agent;
import io.agentscope.core.agent.RuntimeContext;
import io.agentscope.core.event.AgentEvent;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.middleware.AgentInput;
import io.agentscope.core.middleware.MiddlewareBase;
import io.agentscope.core.middleware.ReasoningInput;
import io.agentscope.core.state.AgentState;
import io.agentscope.core.tool.Tool;
import io.agentscope.core.tool.ToolParam;
import io.agentscope.core.tool.Toolkit;
import io.agentscope.core.tool.ToolkitAware;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Server-side AutoContext compression for an AgentScope-Java 2.x agent: the 2.x replacement for
 * 1.x's {@code RemoteAutoContextMemory} + {@code RemoteAutoContextHook} (2.0.0 removed the Memory
 * API and {@code AutoContextMemory}), built as the harness's {@code CompactionMiddleware} is: an
 * {@link #onReasoning} that compresses the agent's context before each reasoning step and writes
 * the result back to {@link AgentState#contextMutable()}.
 *
 * <p>Each call's slot (the user and session of its {@link RuntimeContext}; with no session, the
 * agent's default one) has its own {@code AUTO_CONTEXT} memory on the server, named by {@link
 * Builder#memoryId} and created on first use with this builder's config, profile and token
 * counter (an existing memory keeps its own). Before each reasoning step it:
 * <ol>
 *   <li>sends the messages of the reasoning input the memory has not seen yet: those after the
 *       last one it holds (matched by message id), so each message goes once, also after the
 *       agent was rebuilt from its saved state or when several processes serve the slot in turn
 *       (what this process knows of the memory is checked by its etag, a small {@code
 *       GetMessages} that reads nothing when nothing changed; the first step of a slot here reads
 *       the memory's message ids once);</li>
 *   <li>asks the server to compress if needed and to prepare the reasoning input ({@code
 *       PrepareReasoningInput}, every page): the system message with AgentScope's offload
 *       instruction, then the working history;</li>
 *   <li>makes that working history the agent's context and the model's input. A message the
 *       server kept is the agent's own {@code Msg} object (matched by id), so what the server does
 *       not store ({@code hint} and {@code data} blocks, {@code usage}, block ids) survives; a
 *       summary or offload stub is a new message. The agent's state store saves the compressed
 *       context as usual, so a rebuilt agent goes on from it.</li>
 * </ol>
 * When the call ends ({@link #onAgent}, which 2.0.0 runs around the whole call), it sends what
 * the call added after its last step, the final reply, so the server has it even if the process
 * stops before the slot's next step.
 *
 * <p>It also registers AgentScope's {@code context_reload} tool (1.x {@code ContextOffloadTool}'s
 * name, parameter and texts) on the agent's toolkit when the agent is built (2.0.0's {@link
 * ToolkitAware}); each call of it reads the offloaded messages of the memory of the call's slot.
 * A toolkit that already has a tool of that name fails the agent's {@code build()}.
 *
 * <p>A failure (server down, a bad id) is logged at WARN and the step goes on with its context
 * uncompressed, as {@code CompactionMiddleware} does; {@link Builder#failOnError} fails the call
 * instead. {@link AutoContextProfile#IMPROVED} is the default here and recommended: there is no
 * 2.x {@code AutoContextMemory} whose exact behaviour to reproduce ({@link
 * AutoContextProfile#PARITY} still gives 1.0.12's).
 *
 * <pre>{@code
 * RemoteAutoContextMiddleware autoContext = RemoteAutoContextMiddleware.builder()
 *         .target("127.0.0.1:50051")
 *         .config(AutoContextConfig.builder().msgThreshold(60).lastKeep(20).build())
 *         .build();
 * ReActAgent agent = ReActAgent.builder().name("Assistant").model(model).stateStore(store)
 *         .middleware(autoContext).build();
 * agent.call(List.of(msg), RuntimeContext.builder().userId("张三").sessionId("s1").build()).block();
 * }</pre>
 */
public final class RemoteAutoContextMiddleware implements MiddlewareBase, ToolkitAware, AutoCloseable {

    /** The tool's name, as AgentScope's {@code ContextOffloadTool} registers it. */
    public static final String TOOL_NAME = ContextReloadTexts.TOOL_NAME;

    /** The prefix of every id {@link #defaultMemoryId} makes. */
    public static final String DEFAULT_ID_PREFIX = "agentscope2-autocontext:";

    /** Messages per {@code AddMessages} call: below the server's 1,000. */
    static final int ADD_BATCH_MESSAGES = 500;

    /** Serialised bytes per {@code AddMessages} call: well below the server's 64 MiB receive limit. */
    static final long ADD_BATCH_BYTES = 8L * 1024 * 1024;

    /** How many slots' memories this process keeps what it knows of. */
    static final int MAX_SLOTS = 10_000;

    private static final Logger log = LoggerFactory.getLogger(RemoteAutoContextMiddleware.class);

    /** Names the AUTO_CONTEXT memory of one slot. */
    @FunctionalInterface
    public interface MemoryIdFunction {
        /**
         * The memory id of a slot.
         *
         * @param agentName the agent's name
         * @param userId the call's user id; null for the anonymous user
         * @param sessionId the call's session id (the agent's default one when the call names none)
         * @return an id the server accepts (1 to 256 bytes of UTF-8 without control characters),
         *     different for every slot that must not share a conversation
         */
        String memoryId(String agentName, String userId, String sessionId);
    }

    private final RemoteConnection connection;
    private final boolean ownsConnection;
    private final dev.agentscopememory.grpc.v1.AutoContextConfig wireConfig;
    private final MemoryIdFunction memoryIds;
    private final boolean failOnError;

    /**
     * What this process knows of the memories it used last, by memory id: at most {@value
     * #MAX_SLOTS}, the least recently used forgotten first (a forgotten one costs its next step
     * one read of the memory's message ids).
     */
    private final Map<String, Slot> slots = Collections.synchronizedMap(new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Slot> eldest) {
            return size() > MAX_SLOTS;
        }
    });

    private RemoteAutoContextMiddleware(Builder b) {
        // Checked before any connection is opened.
        if (b.tokenCounter == TokenCounter.CL100K && b.profile != AutoContextProfile.IMPROVED) {
            throw new IllegalArgumentException(
                    "tokenCounter: CL100K is available with the IMPROVED profile only (PARITY counts as Java does)");
        }
        wireConfig = AutoContextWire.toProto(b.config, b.profile, b.tokenCounter);
        memoryIds = b.memoryIds;
        failOnError = b.failOnError;
        connection = b.connectionOrOpen();
        ownsConnection = !b.sharesConnection();
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * The default memory id of a slot: {@value #DEFAULT_ID_PREFIX}, then the agent name, the user
     * id (empty for the anonymous user) and the session id, each with {@code %} and {@code :}
     * percent-encoded and joined by {@code :}, so no two slots (nor two agents) share an id, and
     * none is a session id used as a memory id (1.x's {@code RemoteMemory} convention, which 2.x
     * agents resume from). An id over the server's 256 bytes becomes {@value #DEFAULT_ID_PREFIX}
     * {@code sha256:} and the SHA-256 of the long form, in hex.
     */
    public static String defaultMemoryId(String agentName, String userId, String sessionId) {
        String id = DEFAULT_ID_PREFIX + escape(agentName) + ":" + escape(userId == null ? "" : userId) + ":"
                + escape(sessionId);
        if (id.getBytes(StandardCharsets.UTF_8).length <= Ids.MAX_ID_BYTES) {
            return id;
        }
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(id.getBytes(StandardCharsets.UTF_8));
            return DEFAULT_ID_PREFIX + "sha256:" + HexFormat.of().formatHex(digest);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JVM", e);
        }
    }

    private static String escape(String s) {
        return s.replace("%", "%25").replace(":", "%3A");
    }

    /**
     * Registers the per-call {@code context_reload} tool on the toolkit of the agent being built
     * (2.0.0's {@code build()} calls this on the agent's own copy of its toolkit).
     *
     * @throws IllegalStateException when the toolkit already has a tool of that name (the
     *     application's own, or a second AutoContext middleware's): the toolkit would silently
     *     replace it, and the model would reload from one of two memories without saying which
     */
    @Override
    public void rebindToolkit(Toolkit toolkit) {
        if (toolkit == null) {
            return;
        }
        if (toolkit.getTool(TOOL_NAME) != null) {
            throw new IllegalStateException("RemoteAutoContextMiddleware registers the " + TOOL_NAME + " tool, but the"
                    + " agent's toolkit already has one (the application's, or another AutoContext middleware's),"
                    + " which it would silently replace: give the agent one AutoContext middleware and no tool of"
                    + " that name");
        }
        toolkit.registerTool(new ReloadTool(this));
    }

    /**
     * Sends the new messages, compresses if needed and hands the model (and the agent's context)
     * the working history; on failure the step goes on uncompressed, or fails with {@link
     * Builder#failOnError}.
     */
    @Override
    public Flux<AgentEvent> onReasoning(Agent agent, RuntimeContext ctx, ReasoningInput input,
            Function<ReasoningInput, Flux<AgentEvent>> next) {
        return Mono.fromCallable(() -> prepare(agent, ctx, input))
                .subscribeOn(Schedulers.boundedElastic())
                .onErrorResume(e -> {
                    if (failOnError) {
                        return Mono.error(e);
                    }
                    log.warn("AutoContext compression failed, the step goes on uncompressed: {}", e.getMessage());
                    return Mono.just(input);
                })
                .flatMapMany(next);
    }

    /**
     * Runs the call, then sends what it added to its slot's context after its last reasoning step
     * (the final reply): without this the reply would reach the server only with the slot's next
     * step, never if the process ended first. One {@code AddMessages} (with its request id, so a
     * retry cannot add it twice), after the same etag check as a step; the next step finds it
     * stored and sends nothing again. A failure is logged at WARN and the call's result stands, or,
     * with {@link Builder#failOnError}, the call fails with it. A call that fails sends nothing.
     */
    @Override
    public Flux<AgentEvent> onAgent(Agent agent, RuntimeContext ctx, AgentInput input,
            Function<AgentInput, Flux<AgentEvent>> next) {
        return next.apply(input).concatWith(Mono.fromRunnable(() -> sendAfterCall(agent, ctx))
                .subscribeOn(Schedulers.boundedElastic())
                .onErrorResume(e -> {
                    if (failOnError) {
                        return Mono.error(e);
                    }
                    log.warn("AutoContext: sending the call's reply failed; it goes with the slot's next step: {}",
                            e.getMessage());
                    return Mono.empty();
                })
                .then(Mono.empty()));
    }

    /** Sends the messages of the call's slot context the memory does not hold yet. */
    private void sendAfterCall(Agent agent, RuntimeContext ctx) {
        AgentState state = RuntimeContext.resolveAgentState(ctx, agent);
        if (state == null || state.getContext() == null) {
            return;
        }
        String memoryId = memoryIdOf(agent, ctx);
        // The context holds no system prompt (a step's input has it first, apart).
        List<Msg> conversation = present(state.getContext());
        Slot slot = slots.computeIfAbsent(memoryId, id -> new Slot());
        synchronized (slot) {
            try {
                catchUp(memoryId, slot, conversation);
            } catch (RuntimeException e) {
                slot.forget();
                throw e;
            }
        }
    }

    /**
     * Creates the slot's memory if need be, reads what it holds when its etag moved, and sends
     * the messages of {@code conversation} after the last one it holds. The caller holds the
     * slot's lock: two steps of one slot at once would send the same messages twice.
     */
    private void catchUp(String memoryId, Slot slot, List<Msg> conversation) {
        ensureCreated(slot, memoryId);
        refresh(memoryId, slot);
        send(memoryId, unseen(conversation, slot.ids), slot);
    }

    /** The messages of {@code messages} that are not null, in order. */
    private static List<Msg> present(List<Msg> messages) {
        List<Msg> out = new ArrayList<>(messages.size());
        for (Msg m : messages) {
            if (m != null) {
                out.add(m);
            }
        }
        return out;
    }

    /** The memory id of the call's slot, checked by the server's rules. */
    private String memoryIdOf(Agent agent, RuntimeContext ctx) {
        String user = ctx == null ? null : ctx.getUserId();
        String session = ctx == null ? null : ctx.getSessionId();
        if (session == null || session.isBlank()) {
            session = agent instanceof ReActAgent react && react.getDefaultSessionId() != null
                    ? react.getDefaultSessionId() : agent.getName();
        }
        String id = memoryIds.memoryId(agent.getName(), user, session);
        if (id == null) {
            throw new IllegalArgumentException("memoryId: the memory id function returned null");
        }
        return Ids.checkId(id, "memory_id");
    }

    private ReasoningInput prepare(Agent agent, RuntimeContext ctx, ReasoningInput input) {
        AgentState state = RuntimeContext.resolveAgentState(ctx, agent);
        if (state == null) {
            log.warn("AutoContext: agent {} has no state for this call; the step goes on uncompressed", agent.getName());
            return input;
        }
        String memoryId = memoryIdOf(agent, ctx);
        List<Msg> given = input.messages() == null ? List.of() : input.messages();
        Msg system = !given.isEmpty() && given.get(0) != null && given.get(0).getRole() == MsgRole.SYSTEM
                ? given.get(0) : null;
        List<Msg> conversation = present(given.subList(system == null ? 0 : 1, given.size()));
        Slot slot = slots.computeIfAbsent(memoryId, id -> new Slot());
        synchronized (slot) {
            try {
                catchUp(memoryId, slot, conversation);
                List<dev.agentscopememory.grpc.v1.Msg> prepared = prepareReasoningInput(memoryId, system, slot);
                Map<String, Msg> own = new HashMap<>();
                for (Msg m : conversation) {
                    if (m.getId() != null) {
                        own.put(m.getId(), m);
                    }
                }
                List<Msg> out = new ArrayList<>(prepared.size());
                List<Msg> working = new ArrayList<>(prepared.size());
                Set<String> ids = new HashSet<>();
                for (int i = 0; i < prepared.size(); i++) {
                    dev.agentscopememory.grpc.v1.Msg wire = prepared.get(i);
                    if (i == 0 && system != null) {
                        out.add(MsgConverter.fromProto(wire));
                        continue;
                    }
                    Msg kept = wire.hasId() ? own.get(wire.getId()) : null;
                    Msg m = kept != null ? kept : MsgConverter.fromProto(wire);
                    out.add(m);
                    working.add(m);
                    if (wire.hasId()) {
                        ids.add(wire.getId());
                    }
                }
                List<Msg> context = state.contextMutable();
                context.clear();
                context.addAll(working);
                slot.ids = ids;
                return new ReasoningInput(out, input.tools(), input.options());
            } catch (RuntimeException e) {
                slot.forget();
                throw e;
            }
        }
    }

    /** The messages after the last one the memory holds (all of them when it holds none). */
    private static List<Msg> unseen(List<Msg> conversation, Set<String> stored) {
        int last = -1;
        for (int i = 0; i < conversation.size(); i++) {
            if (conversation.get(i).getId() != null && stored.contains(conversation.get(i).getId())) {
                last = i;
            }
        }
        return conversation.subList(last + 1, conversation.size());
    }

    private void ensureCreated(Slot slot, String memoryId) {
        if (slot.created) {
            return;
        }
        CreateMemoryRequest request = CreateMemoryRequest.newBuilder()
                .setMemoryId(memoryId)
                .setKind(WireEnums.toProto(MemoryKind.AUTO_CONTEXT))
                .setAutoContextConfig(wireConfig)
                .setAllowExisting(true)
                .build();
        connection.call("MemoryService/CreateMemory", true, () -> connection.memoryService().createMemory(request));
        slot.created = true;
    }

    /**
     * Brings {@code slot.ids} up to date with the memory: what this process last knew is checked
     * by its etag (unchanged: nothing is read; only messages added, by another process serving
     * the slot: just those), otherwise every page is read. So an agent served in turns by several
     * processes (replicas behind one state store) never sends another's messages again.
     */
    private void refresh(String memoryId, Slot slot) {
        if (slot.ids != null && slot.etag != null) {
            GetMessagesRequest check = GetMessagesRequest.newBuilder().setMemoryId(memoryId)
                    .setIfNoneMatch(slot.etag).setAcceptDelta(true).build();
            GetMessagesResponse answer = connection.call("MemoryService/GetMessages", true,
                    () -> connection.memoryService().getMessages(check));
            if (answer.getNotModified()) {
                return;
            }
            if (answer.getDelta()) {
                addIds(slot.ids, answer.getMessagesList());
                slot.etag = answer.getEtag();
                return;
            }
            if (answer.getNextPageToken().isEmpty()) {
                // Changed otherwise (compressed, say), and the whole list came in one page.
                slot.ids = addIds(new HashSet<>(), answer.getMessagesList());
                slot.etag = answer.getEtag();
                return;
            }
        }
        String[] etag = new String[1];
        List<dev.agentscopememory.grpc.v1.Msg> all = PagedRead.readAll(token -> {
            GetMessagesRequest request = GetMessagesRequest.newBuilder()
                    .setMemoryId(memoryId).setPageToken(token).build();
            GetMessagesResponse page = connection.call("MemoryService/GetMessages", true,
                    () -> connection.memoryService().getMessages(request));
            if (token.isEmpty()) {
                etag[0] = page.getEtag();
            }
            return new PagedRead.Page<>(page.getMessagesList(), page.getNextPageToken());
        });
        slot.ids = addIds(new HashSet<>(), all);
        slot.etag = etag[0];
    }

    private static Set<String> addIds(Set<String> ids, List<dev.agentscopememory.grpc.v1.Msg> msgs) {
        for (dev.agentscopememory.grpc.v1.Msg m : msgs) {
            if (m.hasId()) {
                ids.add(m.getId());
            }
        }
        return ids;
    }

    /** Appends {@code msgs} in batches; each batch's request id makes its retry safe. */
    private void send(String memoryId, List<Msg> msgs, Slot slot) {
        List<dev.agentscopememory.grpc.v1.Msg> batch = new ArrayList<>();
        long bytes = 0;
        for (Msg m : msgs) {
            dev.agentscopememory.grpc.v1.Msg wire = MsgConverter.toProto(m);
            int size = wire.getSerializedSize();
            if (!batch.isEmpty() && (batch.size() >= ADD_BATCH_MESSAGES || bytes + size > ADD_BATCH_BYTES)) {
                sendBatch(memoryId, batch, slot);
                batch = new ArrayList<>();
                bytes = 0;
            }
            batch.add(wire);
            bytes += size;
        }
        if (!batch.isEmpty()) {
            sendBatch(memoryId, batch, slot);
        }
    }

    private void sendBatch(String memoryId, List<dev.agentscopememory.grpc.v1.Msg> batch, Slot slot) {
        AddMessagesRequest request = AddMessagesRequest.newBuilder()
                .setMemoryId(memoryId)
                .addAllMessages(batch)
                .setRequestId(UUID.randomUUID().toString())
                .build();
        AddMessagesResponse answer = connection.call("MemoryService/AddMessages", true,
                () -> connection.memoryService().addMessages(request));
        addIds(slot.ids, batch);
        // This add the only change since what we knew: we know the state after it too.
        slot.etag = slot.etag != null && slot.etag.equals(answer.getPreviousEtag()) ? answer.getEtag() : null;
    }

    /** Every page of {@code PrepareReasoningInput}: the system message (when given), then the working history. */
    private List<dev.agentscopememory.grpc.v1.Msg> prepareReasoningInput(String memoryId, Msg system, Slot slot) {
        PrepareReasoningInputRequest.Builder request = PrepareReasoningInputRequest.newBuilder().setMemoryId(memoryId);
        if (system != null) {
            request.setSystemMessage(MsgConverter.toProto(system));
        }
        // The first page compresses (not retried: a compression is not idempotent); later pages
        // read the state it left. A change between pages aborts, and the whole call starts again.
        for (int attempt = 1; ; attempt++) {
            List<dev.agentscopememory.grpc.v1.Msg> out = new ArrayList<>();
            String token = "";
            try {
                do {
                    PrepareReasoningInputRequest built = request.setPageToken(token).build();
                    PrepareReasoningInputResponse page = connection.call("MemoryService/PrepareReasoningInput",
                            !token.isEmpty(), () -> connection.memoryService().prepareReasoningInput(built));
                    if (page.getCompressed()) {
                        // The messages changed; their new etag is read at the next step.
                        slot.etag = null;
                    }
                    out.addAll(page.getMessagesList());
                    token = page.getNextPageToken();
                } while (!token.isEmpty());
                return out;
            } catch (RemoteMemoryException.Aborted e) {
                if (attempt >= PagedRead.CONSISTENT_READ_ATTEMPTS) {
                    throw e;
                }
            }
        }
    }

    /**
     * The offloaded messages under {@code uuid} in the memory of the call's slot, every page; when
     * nothing is stored under it the server answers with AgentScope's explanatory message.
     */
    List<Msg> reload(Agent agent, RuntimeContext ctx, String uuid) {
        String memoryId = memoryIdOf(agent, ctx);
        return MsgConverter.fromProto(PagedRead.readAll(token -> {
            ReloadContextRequest request = ReloadContextRequest.newBuilder()
                    .setMemoryId(memoryId).setWorkingContextOffloadUuid(uuid).setPageToken(token).build();
            ReloadContextResponse page = connection.call("MemoryService/ReloadContext", true,
                    () -> connection.memoryService().reloadContext(request));
            return new PagedRead.Page<>(page.getMessagesList(), page.getNextPageToken());
        }));
    }

    /** Closes the connection if this middleware created it. */
    @Override
    public void close() {
        if (ownsConnection) {
            connection.close();
        }
    }

    /** What this process knows of one memory; guarded by itself. */
    private static final class Slot {
        /** Whether CreateMemory succeeded here. */
        boolean created;
        /** The ids of the messages the memory holds in its working history; null: read them. */
        Set<String> ids;
        /** The etag of the memory's messages {@link #ids} names; null: unknown, read them. */
        String etag;

        /** After a failed exchange what the server holds is no longer known: read it next time. */
        void forget() {
            ids = null;
            etag = null;
        }
    }

    /**
     * The {@code context_reload} tool, with the name, parameter and texts of AgentScope 1.x's
     * {@code ContextOffloadTool} (as agentscope1's {@code RemoteContextReloadTool} has them), run
     * on the memory of the call that runs it (the toolkit passes the call's {@code Agent} and
     * {@code RuntimeContext}; parameters without {@code @ToolParam} are not in the schema).
     */
    static final class ReloadTool {
        private final RemoteAutoContextMiddleware owner;

        ReloadTool(RemoteAutoContextMiddleware owner) {
            this.owner = owner;
        }

        @Tool(name = TOOL_NAME, description = ContextReloadTexts.DESCRIPTION)
        public List<Msg> reload(
                @ToolParam(name = ContextReloadTexts.PARAMETER, description = ContextReloadTexts.PARAMETER_DESCRIPTION)
                        String uuid,
                Agent agent, RuntimeContext ctx) {
            if (uuid == null || uuid.isBlank()) {
                return List.of(text(ContextReloadTexts.BLANK_UUID));
            }
            try {
                return owner.reload(agent, ctx, uuid);
            } catch (RemoteMemoryException | IllegalArgumentException e) {
                return List.of(text(ContextReloadTexts.failed(uuid, e.getMessage())));
            }
        }

        private static Msg text(String text) {
            return Msg.builder().content(TextBlock.builder().text(text).build()).build();
        }
    }

    /**
     * Builder of {@link RemoteAutoContextMiddleware}: the connection options, the AutoContext
     * {@link #config}, {@link #profile} and {@link #tokenCounter} (applied when a slot's memory is
     * created; an existing memory keeps its own), {@link #memoryId} and {@link #failOnError}.
     */
    public static final class Builder extends ConnectionOptions<Builder> {
        private AutoContextConfig config = AutoContextConfig.builder().build();
        private AutoContextProfile profile = AutoContextProfile.IMPROVED;
        private TokenCounter tokenCounter = TokenCounter.JAVA_ESTIMATE;
        private MemoryIdFunction memoryIds = RemoteAutoContextMiddleware::defaultMemoryId;
        private boolean failOnError;

        private Builder() {}

        /** The AutoContext settings (defaults: AgentScope-Java 1.0.12's {@code AutoContextConfig}'s). */
        public Builder config(AutoContextConfig config) {
            this.config = Objects.requireNonNull(config, "config must not be null");
            return this;
        }

        /**
         * {@link AutoContextProfile#IMPROVED} (default, recommended: the server's fixes of 1.0.12's
         * known bugs and far fewer summariser calls) or {@link AutoContextProfile#PARITY} (exactly
         * 1.0.12's {@code AutoContextMemory}).
         */
        public Builder profile(AutoContextProfile profile) {
            this.profile = Objects.requireNonNull(profile, "profile must not be null");
            return this;
        }

        /**
         * {@link TokenCounter#JAVA_ESTIMATE}, AgentScope's estimate (default), or {@link
         * TokenCounter#CL100K} (improved profile only; the server refuses it otherwise).
         */
        public Builder tokenCounter(TokenCounter tokenCounter) {
            this.tokenCounter = Objects.requireNonNull(tokenCounter, "tokenCounter must not be null");
            return this;
        }

        /**
         * How a slot's memory is named (default {@link RemoteAutoContextMiddleware#defaultMemoryId}):
         * give one when ids must follow a scheme of yours. It must give every slot that must not
         * share a conversation its own id; an id the server would refuse fails the step (see
         * {@link #failOnError}).
         */
        public Builder memoryId(MemoryIdFunction memoryIds) {
            this.memoryIds = Objects.requireNonNull(memoryIds, "memoryId must not be null");
            return this;
        }

        /**
         * Whether a failure (server down, an id the server refuses) fails the agent call with a
         * {@link RemoteMemoryException} (or {@code IllegalArgumentException}); default false: it is
         * logged at WARN and the step goes on with its context uncompressed, as AgentScope's
         * {@code CompactionMiddleware} does. The {@code context_reload} tool's failures are always
         * its result text.
         */
        public Builder failOnError(boolean failOnError) {
            this.failOnError = failOnError;
            return this;
        }

        public RemoteAutoContextMiddleware build() {
            return new RemoteAutoContextMiddleware(this);
        }
    }
}
