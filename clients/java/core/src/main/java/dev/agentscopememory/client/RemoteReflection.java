package dev.agentscopememory.client;

import dev.agentscopememory.grpc.v1.ConsolidateRequest;
import dev.agentscopememory.grpc.v1.ConsolidateResponse;
import dev.agentscopememory.grpc.v1.LongTermLifecycleServiceGrpc;
import dev.agentscopememory.grpc.v1.Scope;
import dev.agentscopememory.grpc.v1.TriggerReflectionRequest;
import dev.agentscopememory.grpc.v1.TriggerReflectionResponse;
import java.util.List;
import java.util.Objects;

/**
 * Reflection and consolidation of one exact long-term scope, on demand, through {@code
 * LongTermLifecycleService}: {@link #triggerReflection} writes one {@code reflection} memory
 * summarising the scope's unreflected facts when they call for it (thresholds overridable);
 * {@link #consolidate} merges clusters of similar facts, keeping a merge only if its fidelity
 * check passes, or with {@code dryRun} reports what it would do. Neither call is retried: both
 * write, and the caller decides whether to run them again (a rerun is safe).
 */
public final class RemoteReflection {

    private final RemoteConnection connection;

    /**
     * @param connection the server
     */
    public RemoteReflection(RemoteConnection connection) {
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
     * @param ran whether the scope held more facts than the threshold
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
     * @param threshold consolidate only above this many facts, or {@code null} for the server's (150)
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
}
