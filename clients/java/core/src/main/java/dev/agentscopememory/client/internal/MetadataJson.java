package dev.agentscopememory.client.internal;

import com.fasterxml.jackson.databind.JsonMappingException;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * A long-term memory builder's metadata as the JSON AgentScope's codec writes, for both AgentScope
 * majors. Not public API: it is public only so the adapter modules share it, and may change in any
 * release.
 *
 * <p>AgentScope's Jackson codec (1.0.9 to 2.0.0 alike) reports a value it cannot write only as
 * "Failed to serialize object to JSON", its {@code JsonException} wrapping Jackson's exception.
 * Here that becomes an {@link IllegalArgumentException} naming where in the metadata the value is
 * ({@code metadata["来源"][1]}) and Jackson's reason. It names no AgentScope type: each adapter
 * passes its codec and the class of its codec's exception.
 */
public final class MetadataJson {

    /** How deep into the metadata an error names where a value the codec cannot write is. */
    static final int MAX_PATH_SHOWN = 8;

    private MetadataJson() {}

    /**
     * The metadata as {@code toJson} writes it, {@code ""} when there is none.
     *
     * @param values the builder's metadata; the very map given to {@code toJson}, whose path
     *     Jackson reports from it
     * @param toJson the codec's writer, {@code JsonUtils.getJsonCodec()::toJson}
     * @param codecFailure what the codec throws when Jackson fails, with Jackson's exception as
     *     its cause ({@code io.agentscope.core.util.JsonException})
     * @throws IllegalArgumentException when the codec cannot write a value, naming where in the
     *     metadata it is and why
     */
    public static String write(Map<String, Object> values, Function<Object, String> toJson,
            Class<? extends RuntimeException> codecFailure) {
        if (values.isEmpty()) {
            return "";
        }
        try {
            return toJson.apply(values);
        } catch (RuntimeException e) {
            if (!codecFailure.isInstance(e)) {
                throw e;
            }
            throw unwritable(values, toJson, codecFailure, e);
        }
    }

    /** Where in {@code values} the value the codec could not write is, and why, from Jackson's path. */
    private static IllegalArgumentException unwritable(Map<String, Object> values, Function<Object, String> toJson,
            Class<? extends RuntimeException> codecFailure, RuntimeException e) {
        if (!(e.getCause() instanceof JsonMappingException why)) {
            return new IllegalArgumentException("metadata: cannot be written as JSON: " + e.getMessage(), e);
        }
        List<JsonMappingException.Reference> path = why.getPath();
        Object value = values;
        StringBuilder where = new StringBuilder("metadata");
        if (path.isEmpty() || path.get(0).getFrom() != values) {
            // Jackson keeps the innermost 1,000 steps only (a value holding itself fails at the
            // nesting limit): find the key by writing each value alone.
            String key = firstUnwritableKey(values, toJson, codecFailure);
            if (key != null) {
                where.append("[\"").append(key).append("\"]...");
                value = values.get(key);
            }
            path = List.of();
        }
        int depth = 0;
        for (JsonMappingException.Reference ref : path) {
            if (depth++ == MAX_PATH_SHOWN) {
                where.append("...");
                break;
            }
            if (ref.getFrom() instanceof Map<?, ?> map) {
                where.append("[\"").append(ref.getFieldName()).append("\"]");
                value = map.get(ref.getFieldName());
            } else if (ref.getFieldName() != null) {
                // A bean's property: what it holds is not known without calling its getter.
                where.append('.').append(ref.getFieldName());
                value = null;
            } else {
                where.append('[').append(ref.getIndex()).append(']');
                value = ref.getFrom() instanceof List<?> list && ref.getIndex() >= 0 && ref.getIndex() < list.size()
                        ? list.get(ref.getIndex()) : null;
            }
        }
        return new IllegalArgumentException(where + ": "
                + (value == null ? "this value" : "a " + value.getClass().getName())
                + " cannot be written as JSON by AgentScope's codec (" + why.getOriginalMessage() + "); give"
                + " values it can write: strings, numbers, booleans, lists and maps of them", e);
    }

    /** The first key whose value the codec cannot write on its own, null when each can be. */
    private static String firstUnwritableKey(Map<String, Object> values, Function<Object, String> toJson,
            Class<? extends RuntimeException> codecFailure) {
        for (Map.Entry<String, Object> entry : values.entrySet()) {
            try {
                toJson.apply(entry.getValue());
            } catch (RuntimeException alone) {
                if (!codecFailure.isInstance(alone)) {
                    throw alone;
                }
                return entry.getKey();
            }
        }
        return null;
    }
}
