package dev.agentscopememory.agentscope1;

import com.fasterxml.jackson.annotation.JsonAnyGetter;
import com.fasterxml.jackson.annotation.JsonAnySetter;
import io.agentscope.core.state.State;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One entry of a TIERED memory's session state (an item of {@code tieredMemory_l1}/{@code _l2}/
 * {@code _l3}, an event of {@code tieredMemory_events}, or the {@code tieredMemory_stats} object),
 * kept as the JSON object the server wrote so that saving and loading never loses a field.
 */
public final class TierStateItem implements State {

    private final Map<String, Object> fields = new LinkedHashMap<>();

    /** The entry's fields, in the server's order. */
    @JsonAnyGetter
    public Map<String, Object> fields() {
        return fields;
    }

    @JsonAnySetter
    void set(String key, Object value) {
        fields.put(key, value);
    }
}
