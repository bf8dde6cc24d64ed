package dev.agentscopememory.client;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The options every long-term memory builder offers beside the connection: the metadata stored
 * with each recorded memory and how many memories a retrieve returns. The {@code
 * RemoteLongTermMemory} builders of both AgentScope majors and the 2.x long-term middleware extend
 * it, so the options and their checks are written once.
 *
 * @param <B> the concrete builder, returned by every option for chaining
 */
@SuppressWarnings("unchecked")
public abstract class LongTermOptions<B extends LongTermOptions<B>> extends ConnectionOptions<B> {
    private final Map<String, Object> metadata = new LinkedHashMap<>();
    private int limit;

    protected LongTermOptions() {}

    /**
     * Metadata stored with every recorded memory, replacing any given before; null (as in {@code
     * Mem0LongTermMemory}'s builder) or empty for none.
     *
     * @throws NullPointerException when a key is null (JSON has no null key)
     */
    public B metadata(Map<String, Object> metadata) {
        if (metadata != null && metadata.keySet().stream().anyMatch(java.util.Objects::isNull)) {
            throw new NullPointerException("metadata keys must not be null");
        }
        this.metadata.clear();
        if (metadata != null) {
            this.metadata.putAll(metadata);
        }
        return (B) this;
    }

    /** How many memories a retrieve returns at most; 0 (default) means the server's 5. */
    public B limit(int limit) {
        if (limit < 0) {
            throw new IllegalArgumentException("limit: must not be negative");
        }
        this.limit = limit;
        return (B) this;
    }

    /** The metadata given (read-only); the adapter writes it as JSON with AgentScope's codec. */
    public Map<String, Object> metadataValues() {
        return Collections.unmodifiableMap(metadata);
    }

    /** The limit given, 0 when none. */
    public int limitValue() {
        return limit;
    }
}
