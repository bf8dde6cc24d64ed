package dev.agentscopememory.agentscope1.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.agentscope1.SampleMessages;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.util.JsonUtils;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Both ways of copying (Msg's constructor, and the builder it falls back to) give a message equal
 * to the original whose metadata, at any depth, is its own.
 */
class MsgCopiesTest {

    private static final ObjectMapper TREES = new ObjectMapper();

    /** Every sample through both paths; the samples include null timestamps and nested metadata. */
    static Stream<Arguments> cases() {
        Map<String, UnaryOperator<Msg>> paths = new LinkedHashMap<>();
        paths.put("constructor", MsgCopies::copy);
        paths.put("builder", MsgCopies::viaBuilder);
        List<Arguments> out = new ArrayList<>();
        Map<String, Msg> samples = new LinkedHashMap<>(SampleMessages.all());
        samples.put("mutable nested metadata", withMutableNestedMetadata());
        paths.forEach((path, copy) -> samples.forEach((name, msg) -> out.add(Arguments.of(path, name, msg, copy))));
        return out.stream();
    }

    /** Nested containers that could be changed in place, as Jackson produces when reading. */
    private static Msg withMutableNestedMetadata() {
        Map<String, Object> inner = new HashMap<>();
        inner.put("x", "y");
        List<Object> list = new ArrayList<>(List.of(1, 2));
        list.add(new HashMap<>(Map.of("in list", true)));
        Map<String, Object> meta = new HashMap<>();
        meta.put("map", inner);
        meta.put("list", list);
        meta.put("plain", "value");
        return JsonUtils.getJsonCodec().fromJson(JsonUtils.getJsonCodec().toJson(
                Msg.builder().id("m-mut").name("n").role(MsgRole.ASSISTANT).textContent("t").metadata(meta)
                        .timestamp("2026-04-30 10:51:37.000").build()), Msg.class);
    }

    private static JsonNode json(Object value) throws Exception {
        return TREES.readTree(JsonUtils.getJsonCodec().toJson(value));
    }

    @Test
    void theConstructorIsUsedOnTheSupportedReleases() {
        // Both AgentScope releases the build tests (1.0.9, 1.0.12) allow the fast path; if a
        // release stops allowing it, copies still work (the builder) and this says so.
        assertTrue(MsgCopies.usesConstructor(), "Msg's constructor is not usable; copies go through the builder");
    }

    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("cases")
    void aCopyEqualsTheOriginalAndOwnsItsMetadata(String path, String name, Msg original, UnaryOperator<Msg> copy)
            throws Exception {
        JsonNode before = json(original);
        Msg copied = copy.apply(original);
        assertNotSame(original, copied);
        assertEquals(before, json(copied));
        assertEquals(original.getId(), copied.getId());
        assertEquals(original.getName(), copied.getName());
        assertSame(original.getRole(), copied.getRole());
        assertEquals(json(original.getContent()), json(copied.getContent()));
        assertEquals(original.getTimestamp(), copied.getTimestamp());
        if (original.getTimestamp() == null) {
            assertNull(copied.getTimestamp());
        }

        Msg second = copy.apply(original);
        scribble(copied.getMetadata());
        copied.getMetadata().put("added", "by the caller");
        assertEquals(before, json(original), "the original changed with its copy");
        assertEquals(before, json(second), "another copy changed with the first");
    }

    /** Changes every mutable map and list inside, at any depth. */
    @SuppressWarnings("unchecked")
    private static void scribble(Object value) {
        if (value instanceof Map<?, ?> map) {
            new ArrayList<>(map.values()).forEach(MsgCopiesTest::scribble);
            try {
                ((Map<String, Object>) map).put("scribbled", true);
            } catch (UnsupportedOperationException immutable) {
                // fine: nobody can change it
            }
        } else if (value instanceof List<?> list) {
            new ArrayList<>(list).forEach(MsgCopiesTest::scribble);
            try {
                ((List<Object>) list).add("scribbled");
            } catch (UnsupportedOperationException immutable) {
                // fine: nobody can change it
            }
        }
    }

    @Test
    void copiesIsANewMutableListOfNewMessages() {
        List<Msg> originals = new ArrayList<>(SampleMessages.all().values());
        List<Msg> copies = MsgCopies.copies(originals);
        assertEquals(originals.size(), copies.size());
        for (int i = 0; i < originals.size(); i++) {
            assertNotSame(originals.get(i), copies.get(i));
            assertEquals(originals.get(i).getId(), copies.get(i).getId());
        }
        copies.clear();
        assertEquals(SampleMessages.all().size(), originals.size());
    }
}
