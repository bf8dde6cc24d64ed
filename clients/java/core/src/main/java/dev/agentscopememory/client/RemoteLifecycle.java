package dev.agentscopememory.client;

import dev.agentscopememory.grpc.v1.ConsolidateRequest;
import dev.agentscopememory.grpc.v1.ConsolidateResponse;
import dev.agentscopememory.grpc.v1.ForgetRequest;
import dev.agentscopememory.grpc.v1.ForgetResponse;
import dev.agentscopememory.grpc.v1.GetLongTermMemoryHistoryRequest;
import dev.agentscopememory.grpc.v1.GetLongTermMemoryHistoryResponse;
import dev.agentscopememory.grpc.v1.LongTermLifecycleServiceGrpc;
import dev.agentscopememory.grpc.v1.PurgeLongTermMemoriesRequest;
import dev.agentscopememory.grpc.v1.RestoreLongTermMemoryRequest;
import dev.agentscopememory.grpc.v1.Scope;
import dev.agentscopememory.grpc.v1.TriggerReflectionRequest;
import dev.agentscopememory.grpc.v1.TriggerReflectionResponse;
import dev.agentscopememory.grpc.v1.UpdateLongTermMemoryRequest;
import java.util.List;
import java.util.Objects;

/**
 * The lifecycle of one exact long-term scope, on demand, through {@code LongTermLifecycleService}:
 * {@link #triggerReflection} writes one {@code reflection} memory summarising the scope's
 * unreflected facts when they call for it (thresholds overridable); {@link #consolidate} merges
 * clusters of similar facts, keeping a merge only if its fidelity check passes; {@link #forget}
 * soft-deletes what has faded on Ebbinghaus' curve; {@link #restore} brings a soft-deleted memory
 * back and {@link #purge} deletes soft-deleted ones for good; {@link #setPinned} exempts a memory
 * from all of it (forgetting, decay, merging, reflection). Dry runs report without writing.
 * Calls that write are not retried: the caller decides whether to run them again (a rerun is
 * safe).
 *
 * <pre>{@code
 * RemoteLifecycle lifecycle = new RemoteLifecycle(connection);
 * RemoteLifecycle.Forgetting wouldGo = lifecycle.forget(RemoteLifecycle.scope("助手", "alice", ""), true, null);
 * }</pre>
 */
public final class RemoteLifecycle {

    private final RemoteConnection connection;

    /**
     * @param connection the server
     */
    public RemoteLifecycle(RemoteConnection connection) {
        this.connection = Objects.requireNonNull(connection, "connection");
    }

    /**
     * The exact scope (agent, user, run); empty strings for the ids it does not name.
     *
     * @param agentName the agent's name
     * @param userId the user's id
     * @param runName the run's name
     * @return the scope
     */
    public static Scope scope(String agentName, String userId, String runName) {
        return Scope.newBuilder().setAgentName(agentName).setUserId(userId).setRunName(runName).build();
    }

    /**
     * What a reflection check did.
     *
     * @param reflected whether a reflection was written
     * @param reason why not, when not reflected
     * @param reflectionId the reflection's memory id, or empty
     * @param reflectionText the reflection's text, or empty
     * @param factIds the facts it summarises
     * @param importanceSum the summed importance of the unreflected facts
     * @param method {@code llm} or {@code extractive} (offline), empty without a reflection
     */
    public record Reflection(boolean reflected, String reason, String reflectionId, String reflectionText,
                             List<String> factIds, double importanceSum, String method) {}

    /**
     * What a consolidation did (or would do, in a dry run).
     *
     * @param factsBefore live facts before
     * @param factsAfter live facts after
     * @param merged merges made (or planned)
     * @param originalsRetired facts replaced by merges
     * @param failedFidelity merges refused by the fidelity check (originals kept)
     * @param dryRun whether nothing was written
     * @param ran whether the scope held more unpinned facts than the threshold
     * @param reason why it did not run
     */
    public record Consolidation(int factsBefore, int factsAfter, int merged, int originalsRetired,
                                int failedFidelity, boolean dryRun, boolean ran, String reason) {}

    /** Overrides of one call; {@code null} fields take the server's settings. */
    public static final class ReflectionOptions {
        private Double importanceThreshold;
        private Integer minFacts;
        private Double cooldownSeconds;

        /**
         * @param value reflect when the facts' importance adds up to this
         * @return these options
         */
        public ReflectionOptions importanceThreshold(double value) {
            importanceThreshold = value;
            return this;
        }

        /**
         * @param value the fewest facts a reflection summarises
         * @return these options
         */
        public ReflectionOptions minFacts(int value) {
            minFacts = value;
            return this;
        }

        /**
         * @param value the least age of the newest reflection, in seconds
         * @return these options
         */
        public ReflectionOptions cooldownSeconds(double value) {
            cooldownSeconds = value;
            return this;
        }
    }

    /**
     * Reflects over the scope's unreflected facts now, if they call for it.
     *
     * @param scope the exact scope
     * @param options overrides, or {@code null}
     * @return what the check did
     */
    public Reflection triggerReflection(Scope scope, ReflectionOptions options) {
        TriggerReflectionRequest.Builder request = TriggerReflectionRequest.newBuilder().setScope(scope);
        if (options != null) {
            if (options.importanceThreshold != null) {
                request.setImportanceThreshold(options.importanceThreshold);
            }
            if (options.minFacts != null) {
                request.setMinFacts(options.minFacts);
            }
            if (options.cooldownSeconds != null) {
                request.setCooldownSeconds(options.cooldownSeconds);
            }
        }
        TriggerReflectionResponse r = connection.call("LongTermLifecycleService/TriggerReflection", false,
                () -> connection.stub(LongTermLifecycleServiceGrpc::newBlockingStub).triggerReflection(request.build()));
        return new Reflection(r.getReflected(), r.getReason(), r.getReflection().getId(), r.getReflection().getMemory(),
                List.copyOf(r.getFactIdsList()), r.getImportanceSum(), r.getMethod());
    }

    /**
     * Consolidates the scope's facts now.
     *
     * @param scope the exact scope
     * @param dryRun report without writing
     * @param threshold consolidate only above this many unpinned facts, or {@code null} for the server's (150)
     * @return what the consolidation did
     */
    public Consolidation consolidate(Scope scope, boolean dryRun, Integer threshold) {
        ConsolidateRequest.Builder request = ConsolidateRequest.newBuilder().setScope(scope).setDryRun(dryRun);
        if (threshold != null) {
            request.setThreshold(threshold);
        }
        ConsolidateResponse r = connection.call("LongTermLifecycleService/Consolidate", false,
                () -> connection.stub(LongTermLifecycleServiceGrpc::newBlockingStub).consolidate(request.build()));
        return new Consolidation(r.getFactsBefore(), r.getFactsAfter(), r.getMerged(), r.getOriginalsRetired(),
                r.getFailedFidelity(), r.getDryRun(), r.getRan(), r.getReason());
    }

    /**
     * A memory forgotten (or that would be, in a dry run).
     *
     * @param id its id
     * @param text its text
     * @param retention its retention when it was decided, in [0, 1]
     */
    public record ForgottenMemory(String id, String text, double retention) {}

    /**
     * What a forgetting run did (or would do, in a dry run).
     *
     * @param dryRun whether nothing was changed
     * @param scanned live memories looked at
     * @param forgottenCount memories forgotten (or that would be)
     * @param forgotten the first of them (at most 100), lowest retention first
     */
    public record Forgetting(boolean dryRun, int scanned, int forgottenCount, List<ForgottenMemory> forgotten) {}

    /**
     * Forgets what has faded in the scope: memories whose retention is below the threshold are
     * soft-deleted (hidden from recall, restorable until purged). A dry run is retried when the
     * server is away; a real run is not.
     *
     * @param scope the exact scope
     * @param dryRun report without changing anything
     * @param threshold the retention below which a memory is forgotten, or {@code null} for the server's (0.1)
     * @return what the run did
     */
    public Forgetting forget(Scope scope, boolean dryRun, Double threshold) {
        ForgetRequest.Builder request = ForgetRequest.newBuilder().setScope(scope).setDryRun(dryRun);
        if (threshold != null) {
            request.setThreshold(threshold);
        }
        ForgetResponse r = connection.call("LongTermLifecycleService/Forget", dryRun,
                () -> connection.stub(LongTermLifecycleServiceGrpc::newBlockingStub).forget(request.build()));
        List<ForgottenMemory> forgotten = r.getForgottenList().stream()
                .map(f -> new ForgottenMemory(f.getMemory().getId(), f.getMemory().getMemory(), f.getRetention()))
                .toList();
        return new Forgetting(r.getDryRun(), r.getScanned(), r.getTotalForgotten(), forgotten);
    }

    /**
     * Brings a soft-deleted memory (forgotten, deleted, reflected or merged) back into recall.
     *
     * @param memoryId the memory's id
     * @return its text, live again
     * @throws RemoteMemoryException.NotFound when it does not exist (or was purged)
     */
    public String restore(String memoryId) {
        RestoreLongTermMemoryRequest request = RestoreLongTermMemoryRequest.newBuilder().setId(memoryId).build();
        return connection.call("LongTermLifecycleService/RestoreLongTermMemory", false,
                () -> connection.stub(LongTermLifecycleServiceGrpc::newBlockingStub).restoreLongTermMemory(request))
                .getMemory().getMemory();
    }

    /**
     * Deletes soft-deleted memories for good (live ones named are left alone); their history stays.
     *
     * @param memoryIds 1 to 1000 ids
     * @return the ids purged
     */
    public List<String> purge(List<String> memoryIds) {
        PurgeLongTermMemoriesRequest request = PurgeLongTermMemoriesRequest.newBuilder().addAllIds(memoryIds).build();
        return List.copyOf(connection.call("LongTermLifecycleService/PurgeLongTermMemories", true,
                () -> connection.stub(LongTermLifecycleServiceGrpc::newBlockingStub).purgeLongTermMemories(request))
                .getPurgedIdsList());
    }

    /**
     * Pins ("remember this for ever") or unpins a long-term memory: a pinned memory is never
     * forgotten, its time decay in ranking stays 1, and consolidation and reflection never retire
     * it; only an explicit delete removes it. The change joins the memory's history (an UPDATE
     * whose detail holds {@code pinned}). Not retried: the caller decides (a rerun is harmless).
     *
     * @param memoryId the memory's id
     * @param pinned true to pin, false to unpin
     * @return whether the memory is pinned now, as the server stored it
     * @throws RemoteMemoryException.NotFound when it does not exist
     */
    public boolean setPinned(String memoryId, boolean pinned) {
        UpdateLongTermMemoryRequest request = UpdateLongTermMemoryRequest.newBuilder().setId(memoryId)
                .setPinned(pinned).build();
        return connection.call("LongTermMemoryService/UpdateLongTermMemory", false,
                () -> connection.longTermMemoryService().updateLongTermMemory(request)).getMemory().getPinned();
    }

    /**
     * One change of a long-term memory.
     *
     * @param event ADD, UPDATE, ASSESS, DELETE, REFLECT, CONSOLIDATE, CONSOLIDATE_TRIM, FORGET, RESTORE or PURGE
     * @param oldText the text before, or {@code null}
     * @param newText the text after, or {@code null}
     * @param detailJson what else changed, and the job that changed it, as a JSON object
     * @param createdAt when (ISO 8601)
     */
    public record HistoryEntry(String event, String oldText, String newText, String detailJson, String createdAt) {}

    /**
     * Every change of a memory, oldest first: lifecycle jobs included, and a purged memory's too.
     * Read page by page ({@code GetLongTermMemoryHistory} answers within the server's page byte
     * budget, so a history of any size passes a stock 4 MiB channel); a history only grows, so
     * the pages are one list.
     *
     * @param memoryId the memory's id
     * @return its history
     */
    public List<HistoryEntry> history(String memoryId) {
        return PagedRead.readAll(token -> {
            GetLongTermMemoryHistoryRequest request = GetLongTermMemoryHistoryRequest.newBuilder()
                    .setId(memoryId).setPageToken(token).build();
            GetLongTermMemoryHistoryResponse page = connection.call("LongTermMemoryService/GetLongTermMemoryHistory",
                    true, () -> connection.longTermMemoryService().getLongTermMemoryHistory(request));
            return new PagedRead.Page<>(page.getEntriesList().stream()
                    .map(e -> new HistoryEntry(e.getEvent(), e.hasOldText() ? e.getOldText() : null,
                            e.hasNewText() ? e.getNewText() : null, e.getDetailJson(), e.getCreatedAt()))
                    .toList(), page.getNextPageToken());
        });
    }
}
