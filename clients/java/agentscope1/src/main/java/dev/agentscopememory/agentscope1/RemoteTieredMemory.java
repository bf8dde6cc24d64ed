package dev.agentscopememory.agentscope1;

import dev.agentscopememory.agentscope1.internal.MsgConverter;
import dev.agentscopememory.client.MemoryKind;
import dev.agentscopememory.client.RemoteState;
import dev.agentscopememory.grpc.v1.AddTieredItemsRequest;
import dev.agentscopememory.grpc.v1.CompactTiersRequest;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.GetTierStatusRequest;
import dev.agentscopememory.grpc.v1.JsonList;
import dev.agentscopememory.grpc.v1.ProjectContextRequest;
import dev.agentscopememory.grpc.v1.ProjectContextResponse;
import dev.agentscopememory.grpc.v1.StateEntry;
import dev.agentscopememory.grpc.v1.TieredConfig;
import dev.agentscopememory.grpc.v1.TieredItemInput;
import dev.agentscopememory.grpc.v1.TieredMemoryServiceGrpc;
import dev.agentscopememory.grpc.v1.TieredTokenCounter;
import io.agentscope.core.memory.Memory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.session.Session;
import io.agentscope.core.state.SessionKey;
import io.agentscope.core.util.JsonUtils;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * An AgentScope {@link Memory} kept as Loom's tiered working memory on an agentscope-memory
 * server (a memory of kind {@code TIERED}).
 *
 * <p>{@link #addMessage(Msg)} adds to L1 (importance scored by the server, or {@link
 * #addMessage(Msg, double)} with the caller's); messages above the promotion threshold are copied
 * to L2, and the server compacts, summarises and moves summaries to long-term memory before the
 * add returns. {@link #getMessages()} returns L1: the compaction marker ("📦 History compacted")
 * when compaction has run, then the recent messages in order. For the next model call, {@link
 * #project} builds a context within a token budget from every tier (plan, facts, shared context,
 * summaries, important and recent messages); {@link #status} is the memory visualiser's data.
 * {@link #saveTo}/{@link #loadFrom} carry every tier under the session keys {@code
 * tieredMemory_l1}, {@code _l2}, {@code _l3}, {@code _events} and {@code _stats}.
 *
 * <pre>{@code
 * RemoteTieredMemory memory = RemoteTieredMemory.builder().target("127.0.0.1:50051")
 *         .memoryId("agent-1").l1Budget(4000).build();
 * ReActAgent agent = ReActAgent.builder().name("a").model(model).memory(memory).build();
 * RemoteTieredMemory.Projection context = memory.project("继续之前的任务", 8000).block();
 * }</pre>
 */
public class RemoteTieredMemory extends AbstractRemoteMemory {

    /** Session keys of a TIERED memory's state. */
    public static final String L1_KEY = "tieredMemory_l1";

    public static final String L2_KEY = "tieredMemory_l2";
    public static final String L3_KEY = "tieredMemory_l3";
    public static final String EVENTS_KEY = "tieredMemory_events";
    public static final String STATS_KEY = "tieredMemory_stats";
    private static final List<String> LIST_KEYS = List.of(L1_KEY, L2_KEY, L3_KEY, EVENTS_KEY);

    private final TieredConfig config;

    protected RemoteTieredMemory(Builder b) {
        super(b, MemoryKind.TIERED, null);
        this.config = b.config.build();
    }

    public static Builder builder() {
        return new Builder();
    }

    @Override
    void configureCreate(CreateMemoryRequest.Builder request) {
        request.setTieredConfig(config);
    }

    private TieredMemoryServiceGrpc.TieredMemoryServiceBlockingStub tiered() {
        return connection.stub(TieredMemoryServiceGrpc::newBlockingStub);
    }

    // ---------------------------------------------------------------- tiered operations

    /** Adds a message with the caller's importance in [0, 1]; emits the status after the moves. */
    public Mono<TierStatus> addMessage(Msg message, double importance) {
        Objects.requireNonNull(message, "message");
        if (!(importance >= 0.0 && importance <= 1.0)) {
            return Mono.error(new IllegalArgumentException("importance: must be from 0 to 1, not " + importance));
        }
        return Mono.fromCallable(() -> {
            ensureMemory();
            AddTieredItemsRequest request = AddTieredItemsRequest.newBuilder()
                    .setMemoryId(memoryId)
                    .addItems(TieredItemInput.newBuilder().setMessage(MsgConverter.toProto(message))
                            .setImportance(importance))
                    .setRequestId(UUID.randomUUID().toString())
                    .build();
            return TierStatus.of(call("TieredMemoryService/AddTieredItems", true,
                    () -> tiered().addTieredItems(request)).getStatus());
        }).subscribeOn(Schedulers.boundedElastic());
    }

    /** Runs the moves the thresholds call for now; emits the status after them. */
    public Mono<TierStatus> compact() {
        return Mono.fromCallable(() -> {
            ensureMemory();
            CompactTiersRequest request = CompactTiersRequest.newBuilder().setMemoryId(memoryId).build();
            return TierStatus.of(call("TieredMemoryService/CompactTiers", true,
                    () -> tiered().compactTiers(request)).getStatus());
        }).subscribeOn(Schedulers.boundedElastic());
    }

    /** Per-tier items and tokens against budgets, summaries, L4 vectors and compaction ratio. */
    public Mono<TierStatus> status() {
        return Mono.fromCallable(() -> {
            ensureMemory();
            GetTierStatusRequest request = GetTierStatusRequest.newBuilder().setMemoryId(memoryId).build();
            return TierStatus.of(call("TieredMemoryService/GetTierStatus", true,
                    () -> tiered().getTierStatus(request)).getStatus());
        }).subscribeOn(Schedulers.boundedElastic());
    }

    /** The context for the next model call within {@code totalBudget} tokens, mode detected from the instruction. */
    public Mono<Projection> project(String instruction, long totalBudget) {
        return project(ProjectionOptions.builder(instruction, totalBudget).build());
    }

    /** The context for the next model call, as {@code options} say. */
    public Mono<Projection> project(ProjectionOptions options) {
        Objects.requireNonNull(options, "options");
        return Mono.fromCallable(() -> {
            ensureMemory();
            ProjectContextRequest.Builder request = ProjectContextRequest.newBuilder()
                    .setMemoryId(memoryId)
                    .setInstruction(options.instruction())
                    .setTotalBudget(options.totalBudget())
                    .setIncludePlan(options.plan() != null)
                    .setPlan(options.plan() == null ? "" : options.plan())
                    .setIncludeFacts(options.includeFacts())
                    .addAllSharedContext(MsgConverter.toProto(options.sharedContext()));
            if (options.mode() != null) {
                request.setMode(options.mode().toProto());
            }
            ProjectContextRequest built = request.build();
            return Projection.of(call("TieredMemoryService/ProjectContext", true,
                    () -> tiered().projectContext(built)));
        }).subscribeOn(Schedulers.boundedElastic());
    }

    // ---------------------------------------------------------------- StateModule

    /** Saves every tier, the events and the running totals under the {@code tieredMemory_*} keys. */
    @Override
    public void saveTo(Session session, SessionKey sessionKey) {
        ensureMemory();
        flush();
        RemoteState.Saved state = RemoteState.save(connection, memoryId);
        for (StateEntry entry : state.entries()) {
            if (entry.hasList()) {
                List<TierStateItem> items = new ArrayList<>();
                for (String item : entry.getList().getItemsList()) {
                    items.add(JsonUtils.getJsonCodec().fromJson(item, TierStateItem.class));
                }
                session.save(sessionKey, entry.getKey(), items);
            } else {
                session.save(sessionKey, entry.getKey(), JsonUtils.getJsonCodec().fromJson(entry.getJson(), TierStateItem.class));
            }
        }
    }

    /**
     * Replaces every tier with the session's {@code tieredMemory_*} entries, atomically. The next
     * {@link #getMessages()} reads L1 back: the server derives its messages from the items.
     */
    @Override
    public void loadFrom(Session session, SessionKey sessionKey) {
        List<StateEntry> entries = new ArrayList<>();
        for (String key : LIST_KEYS) {
            JsonList.Builder list = JsonList.newBuilder();
            List<TierStateItem> items = session.getList(sessionKey, key, TierStateItem.class);
            for (int i = 0; i < items.size(); i++) {
                if (items.get(i) != null) {
                    list.addItems(MsgConverter.stateJson(items.get(i), key + "[" + i + "]"));
                }
            }
            entries.add(StateEntry.newBuilder().setKey(key).setList(list).build());
        }
        Optional<TierStateItem> stats = session.get(sessionKey, STATS_KEY, TierStateItem.class);
        stats.ifPresent(s -> entries.add(StateEntry.newBuilder().setKey(STATS_KEY)
                .setJson(MsgConverter.stateJson(s, STATS_KEY)).build()));
        loadState(entries, null);
    }

    // ---------------------------------------------------------------- values

    /** Loom's projection modes. */
    public enum ProjectionMode {
        /** Balanced plan, facts and history. */
        STANDARD,
        /** Only what is necessary. */
        MINIMAL,
        /** More raw recent context. */
        DEBUG,
        /** Facts and evidence first. */
        ANALYTICAL,
        /** History first. */
        CONTEXTUAL,
        /**
         * A mode this client does not know, reported by a newer server (or none reported): the
         * projection is still usable. Only ever in a {@link Projection}; not a mode to ask for.
         */
        UNKNOWN;

        private static final String NOT_A_CHOICE =
                "mode: UNKNOWN is not a mode to ask for; give a mode, or none to detect it from the instruction";

        /** The wire value; the switch has no default, so a new constant without one fails the build. */
        dev.agentscopememory.grpc.v1.ProjectionMode toProto() {
            return switch (this) {
                case STANDARD -> dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_STANDARD;
                case MINIMAL -> dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_MINIMAL;
                case DEBUG -> dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_DEBUG;
                case ANALYTICAL -> dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_ANALYTICAL;
                case CONTEXTUAL -> dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_CONTEXTUAL;
                case UNKNOWN -> throw new IllegalArgumentException(NOT_A_CHOICE);
            };
        }

        /**
         * The mode of a wire value; {@link #UNKNOWN} for one this client does not know (a newer
         * server may add modes: the projection must not fail for its label).
         */
        static ProjectionMode fromProto(int wireValue) {
            return switch (wireValue) {
                case dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_STANDARD_VALUE -> STANDARD;
                case dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_MINIMAL_VALUE -> MINIMAL;
                case dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_DEBUG_VALUE -> DEBUG;
                case dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_ANALYTICAL_VALUE -> ANALYTICAL;
                case dev.agentscopememory.grpc.v1.ProjectionMode.PROJECTION_MODE_CONTEXTUAL_VALUE -> CONTEXTUAL;
                default -> UNKNOWN;
            };
        }
    }

    /**
     * What {@link #project(ProjectionOptions)} builds a context for.
     *
     * @param instruction the task of the next model call (drives mode detection and fact ranking)
     * @param totalBudget the token budget, 1 to 200000
     * @param mode the mode, or null to detect it from the instruction
     * @param plan a plan to include, or null for none
     * @param includeFacts whether to include the facts section
     * @param sharedContext messages the caller adds (e.g. a shared memory pool's)
     */
    public record ProjectionOptions(String instruction, long totalBudget, ProjectionMode mode, String plan,
            boolean includeFacts, List<Msg> sharedContext) {

        /** A builder with the instruction and budget; facts on, no plan, mode detected. */
        public static OptionsBuilder builder(String instruction, long totalBudget) {
            return new OptionsBuilder(instruction, totalBudget);
        }
    }

    /** Builder of {@link ProjectionOptions}. */
    public static final class OptionsBuilder {
        private final String instruction;
        private final long totalBudget;
        private ProjectionMode mode;
        private String plan;
        private boolean includeFacts = true;
        private List<Msg> sharedContext = List.of();

        private OptionsBuilder(String instruction, long totalBudget) {
            this.instruction = instruction == null ? "" : instruction;
            this.totalBudget = totalBudget;
        }

        /**
         * The mode (default, or null: detected from the instruction).
         *
         * @throws IllegalArgumentException for {@link ProjectionMode#UNKNOWN}
         */
        public OptionsBuilder mode(ProjectionMode mode) {
            if (mode == ProjectionMode.UNKNOWN) {
                throw new IllegalArgumentException(ProjectionMode.NOT_A_CHOICE);
            }
            this.mode = mode;
            return this;
        }

        /** A plan to include in the plan section. */
        public OptionsBuilder plan(String plan) {
            this.plan = plan;
            return this;
        }

        /** Whether to include the facts section (default true). */
        public OptionsBuilder includeFacts(boolean includeFacts) {
            this.includeFacts = includeFacts;
            return this;
        }

        /** Messages the caller adds as shared context. */
        public OptionsBuilder sharedContext(List<Msg> sharedContext) {
            this.sharedContext = List.copyOf(sharedContext);
            return this;
        }

        public ProjectionOptions build() {
            return new ProjectionOptions(instruction, totalBudget, mode, plan, includeFacts, sharedContext);
        }
    }

    /**
     * A projected context.
     *
     * @param messages the messages for the model, recent history last
     * @param mode the mode used; {@link ProjectionMode#UNKNOWN} when the server used one this client does not know
     * @param modeDetected whether the mode was detected from the instruction
     * @param tokens tokens of the messages (never more than the budget)
     * @param sectionTokens tokens per section (plan, facts, shared, summaries, working, recent)
     */
    public record Projection(List<Msg> messages, ProjectionMode mode, boolean modeDetected, long tokens,
            Map<String, Long> sectionTokens) {

        static Projection of(ProjectContextResponse response) {
            return new Projection(MsgConverter.fromProto(response.getMessagesList()),
                    ProjectionMode.fromProto(response.getModeValue()), response.getModeDetected(),
                    response.getTokens(), Map.copyOf(response.getSectionTokensMap()));
        }
    }

    /**
     * One tier's usage.
     *
     * @param tier 1 to 4
     * @param items items it holds (L4: vectors this memory wrote to long-term memory)
     * @param tokens tokens it holds
     * @param budget its budget in tokens
     */
    public record TierUsage(int tier, long items, long tokens, long budget) {}

    /**
     * A TIERED memory's status (Loom's memory visualiser, as data).
     *
     * @param memoryId the memory's id
     * @param tiers L1 to L4
     * @param summaries summaries in L3
     * @param l4Vectors vectors written to long-term memory
     * @param compactionRatio tokens summaries replaced per summary token (0 before any summary)
     * @param compactions L1 compactions so far
     * @param compacted whether L1 starts with the compaction marker
     */
    public record TierStatus(String memoryId, List<TierUsage> tiers, long summaries, long l4Vectors,
            double compactionRatio, long compactions, boolean compacted) {

        static TierStatus of(dev.agentscopememory.grpc.v1.TierStatus s) {
            List<TierUsage> tiers = new ArrayList<>();
            for (dev.agentscopememory.grpc.v1.TierUsage u : s.getTiersList()) {
                tiers.add(new TierUsage(u.getTierValue(), u.getItems(), u.getTokens(), u.getBudget()));
            }
            return new TierStatus(s.getMemoryId(), List.copyOf(tiers), s.getSummaries(), s.getL4Vectors(),
                    s.getCompactionRatio(), s.getCompactions(), s.getCompacted());
        }
    }

    /** Builder of {@link RemoteTieredMemory}; unset budgets and thresholds take the server's defaults. */
    public static final class Builder extends AbstractBuilder<Builder> {
        private final TieredConfig.Builder config = TieredConfig.newBuilder();

        private Builder() {}

        /** L1 (recent messages) budget in tokens (default 8000). */
        public Builder l1Budget(long tokens) {
            config.setL1Budget(tokens);
            return this;
        }

        /** L2 (important messages) budget in tokens (default 16000). */
        public Builder l2Budget(long tokens) {
            config.setL2Budget(tokens);
            return this;
        }

        /** L3 (session summaries) budget in tokens (default 32000). */
        public Builder l3Budget(long tokens) {
            config.setL3Budget(tokens);
            return this;
        }

        /** L4 (long-term memory) budget in tokens, for the status (default 100000). */
        public Builder l4Budget(long tokens) {
            config.setL4Budget(tokens);
            return this;
        }

        /** Importance above which a message is promoted to L2 (default 0.6). */
        public Builder promoteThreshold(double threshold) {
            config.setPromoteThreshold(threshold);
            return this;
        }

        /** L1 tokens at which compaction runs, 0 for none (default 4000). */
        public Builder l1CompactTrigger(long tokens) {
            config.setL1CompactTrigger(tokens);
            return this;
        }

        /** Count tokens with cl100k instead of the 4-characters estimate. */
        public Builder cl100k(boolean cl100k) {
            config.setTokenCounter(cl100k ? TieredTokenCounter.TIERED_TOKEN_COUNTER_CL100K
                    : TieredTokenCounter.TIERED_TOKEN_COUNTER_ESTIMATE);
            return this;
        }

        /** Whether the server scores messages added without an importance (default true). */
        public Builder scoreImportance(boolean score) {
            config.setScoreImportance(score);
            return this;
        }

        /** Score unweighted adds with the server's LLM instead of the offline heuristic (default false). */
        public Builder llmImportance(boolean llm) {
            config.setLlmImportance(llm);
            return this;
        }

        /** Move L3's oldest summaries into long-term memory (default true). */
        public Builder vectorize(boolean vectorize) {
            config.setVectorize(vectorize);
            return this;
        }

        /** The long-term scope L4 uses (default: agent name = the memory id). */
        public Builder longTermScope(String agentName, String userId, String runName) {
            config.setAgentName(agentName == null ? "" : agentName).setUserId(userId == null ? "" : userId)
                    .setRunName(runName == null ? "" : runName);
            return this;
        }

        public RemoteTieredMemory build() {
            return new RemoteTieredMemory(this);
        }
    }
}
