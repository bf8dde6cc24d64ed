package dev.agentscopememory.agentscope1;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.agentscope.core.memory.autocontext.AutoContextConfig;
import io.agentscope.core.memory.autocontext.AutoContextMemory;
import io.agentscope.core.memory.autocontext.CompressionEvent;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.model.Model;
import io.agentscope.core.util.JsonUtils;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assertions;

/**
 * Runs the same messages through the real {@code AutoContextMemory} and a {@link
 * RemoteAutoContextMemory} and reduces both to comparable JSON: working and original messages,
 * events and offloads, with offload uuids renamed {@code u1, u2, ...} and the ids of generated
 * messages renamed {@code g1, g2, ...} in order of appearance (so an event still names the message
 * it points at), and the timestamps and measured times of generated messages removed.
 */
final class AutoContextHarness {

    static final ObjectMapper TREES = new ObjectMapper();
    static final Pattern UUID_RE = Pattern.compile("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
    private static final Pattern CUT_UUID = Pattern.compile("uuid=([0-9a-f-]{1,35})\\.\\.\\.");

    private AutoContextHarness() {}

    /** Builds messages with fixed ids and timestamps, so both sides hold identical input. */
    static final class Messages {
        private int seq;

        Msg msg(MsgRole role, String name, ContentBlock... blocks) {
            int n = seq++;
            return Msg.builder().id("msg-" + n).name(name).role(role).content(blocks)
                    .timestamp(String.format("2026-01-01 00:%02d:%02d.%03d", n / 60000 % 60, n / 1000 % 60, n % 1000))
                    .build();
        }

        Msg u(String text) {
            return msg(MsgRole.USER, "user", TextBlock.builder().text(text).build());
        }

        Msg a(String text) {
            return msg(MsgRole.ASSISTANT, "assistant", TextBlock.builder().text(text).build());
        }

        Msg tu(String tool, String id) {
            return msg(MsgRole.ASSISTANT, "assistant", new ToolUseBlock(id, tool, Map.of()));
        }

        Msg tu(String tool, String id, Map<String, Object> input, String raw) {
            return msg(MsgRole.ASSISTANT, "assistant", new ToolUseBlock(id, tool, input, raw, Map.of()));
        }

        Msg tr(String tool, String id, String output) {
            return msg(MsgRole.TOOL, tool, ToolResultBlock.of(id, tool, TextBlock.builder().text(output).build()));
        }
    }

    static final class Uuids {
        /** Offload uuids, as they appear in offload tags, metadata and reloads. */
        final Map<String, String> names = new LinkedHashMap<>();
        /** Ids of messages a compression created (the input messages keep their msg-N ids). */
        final Map<String, String> generated = new LinkedHashMap<>();

        String id(String id) {
            if (id == null || id.startsWith("msg-")) {
                return id;
            }
            return generated.computeIfAbsent(id, k -> "g" + (generated.size() + 1));
        }

        String rename(String text) {
            Matcher m = UUID_RE.matcher(text);
            StringBuilder out = new StringBuilder();
            while (m.find()) {
                String name = names.computeIfAbsent(m.group(), k -> "u" + (names.size() + 1));
                m.appendReplacement(out, name);
            }
            m.appendTail(out);
            // A preview of an earlier stub can end inside its uuid; keep only the cut's length.
            Matcher cut = CUT_UUID.matcher(out);
            StringBuilder done = new StringBuilder();
            while (cut.find()) {
                cut.appendReplacement(done, "uuid=" + "#".repeat(cut.group(1).length()) + "...");
            }
            cut.appendTail(done);
            return done.toString();
        }
    }

    private static final Pattern LONE_SURROGATE =
            Pattern.compile("[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]");

    /**
     * Java cuts an offload preview by UTF-16 units and may leave half of a surrogate pair; the
     * server writes U+FFFD there instead, since a lone surrogate is not valid UTF-8 and could be
     * neither stored nor sent (a documented difference). Both are one unit, so all else matches.
     */
    static String withLoneSurrogatesReplaced(String json) {
        return LONE_SURROGATE.matcher(json).replaceAll("\uFFFD");
    }

    static JsonNode normalised(List<Msg> msgs, Uuids uuids) throws Exception {
        ArrayNode out = TREES.createArrayNode();
        for (Msg m : msgs) {
            ObjectNode node = (ObjectNode) TREES.readTree(withLoneSurrogatesReplaced(JsonUtils.getJsonCodec().toJson(m)));
            String id = m.getId();
            if (id == null || !id.startsWith("msg-")) {
                if (id != null) {
                    node.put("id", uuids.id(id));
                }
                node.remove("timestamp");
            }
            node = (ObjectNode) TREES.readTree(uuids.rename(node.toString()));
            ObjectNode meta = (ObjectNode) node.get("metadata");
            if (meta != null && meta.get("_chat_usage") instanceof ObjectNode usage) {
                usage.remove("time");
            }
            out.add(node);
        }
        return out;
    }

    static JsonNode events(List<CompressionEvent> events, Uuids uuids) {
        ArrayNode out = TREES.createArrayNode();
        for (CompressionEvent e : events) {
            ObjectNode node = out.addObject();
            node.put("type", e.getEventType());
            node.put("count", e.getCompressedMessageCount());
            node.put("previous", uuids.id(e.getPreviousMessageId()));
            node.put("next", uuids.id(e.getNextMessageId()));
            node.put("compressed", uuids.id(e.getCompressedMessageId()));
            ObjectNode meta = TREES.valueToTree(e.getMetadata() == null ? Map.of() : e.getMetadata());
            meta.remove("time"); // measured on each side
            node.set("metadata", meta);
        }
        return out;
    }

    record Outcome(List<Boolean> compressed, JsonNode working, JsonNode original, JsonNode events, JsonNode offloads) {}

    /** Adds {@code input}, then calls compressIfNeeded {@code rounds} times, on the Java class. */
    static Outcome local(AutoContextConfig config, Model model, List<Msg> input, int rounds) throws Exception {
        AutoContextMemory memory = new AutoContextMemory(config, model);
        input.forEach(memory::addMessage);
        List<Boolean> compressed = compress(memory::compressIfNeeded, rounds);
        return outcome(compressed, memory.getMessages(), memory.getOriginalMemoryMsgs(),
                memory.getCompressionEvents(), memory::reload);
    }

    /** The same on the server. */
    static Outcome remote(String target, AutoContextConfig config, List<Msg> input, int rounds) throws Exception {
        try (RemoteAutoContextMemory memory = RemoteAutoContextMemory.builder().target(target)
                .memoryId("ac-" + UUID.randomUUID()).config(config).deadline(java.time.Duration.ofSeconds(60)).build()) {
            memory.addMessages(input);
            List<Boolean> compressed = compress(memory::compressIfNeeded, rounds);
            return outcome(compressed, memory.getMessages(), memory.getOriginalMemoryMsgs(),
                    memory.getCompressionEvents(), memory::reload);
        }
    }

    private static List<Boolean> compress(java.util.function.BooleanSupplier compressIfNeeded, int rounds) {
        List<Boolean> compressed = new ArrayList<>();
        for (int i = 0; i < rounds; i++) {
            compressed.add(compressIfNeeded.getAsBoolean());
        }
        return compressed;
    }

    /** Normalises one memory's state; offloads are reloaded for every uuid the state mentions. */
    private static Outcome outcome(List<Boolean> compressed, List<Msg> working, List<Msg> original,
            List<CompressionEvent> events, java.util.function.Function<String, List<Msg>> reload) throws Exception {
        Uuids uuids = new Uuids();
        JsonNode workingJson = normalised(working, uuids);
        JsonNode originalJson = normalised(original, uuids);
        JsonNode eventsJson = events(events, uuids);
        ObjectNode offloads = TREES.createObjectNode();
        for (String uuid : new ArrayList<>(uuids.names.keySet())) {
            offloads.set(uuids.rename(uuid), normalised(reload.apply(uuid), uuids));
        }
        return new Outcome(compressed, workingJson, originalJson, eventsJson, offloads);
    }

    /** A summariser for the Java side answering like the scripted LLM endpoint. */
    static Supplier<Model> summariser(String text) {
        return () -> new ScriptedModel(null) {
            @Override
            public reactor.core.publisher.Flux<io.agentscope.core.model.ChatResponse> stream(
                    List<Msg> messages, List<io.agentscope.core.model.ToolSchema> tools,
                    io.agentscope.core.model.GenerateOptions options) {
                return reactor.core.publisher.Flux.just(io.agentscope.core.model.ChatResponse.builder()
                        .id("summary").content(List.of(TextBlock.builder().text(text).build()))
                        .usage(new io.agentscope.core.model.ChatUsage(10, 20, 30.0)).build());
            }
        };
    }

    /**
     * Fails unless the server's outcome equals the Java class's. The message names the first
     * difference (part and JSON path); both outcomes are written to
     * {@code target/autocontext-mismatch/} for a closer look.
     */
    static void assertSameOutcome(String scenario, Outcome reference, Outcome server) throws Exception {
        ObjectNode left = tree(reference);
        ObjectNode right = tree(server);
        if (left.equals(right)) {
            return;
        }
        Path dir = Path.of("target", "autocontext-mismatch");
        Files.createDirectories(dir);
        String file = scenario.replaceAll("[^A-Za-z0-9_-]+", "_");
        var pretty = TREES.writerWithDefaultPrettyPrinter()
                .with(com.fasterxml.jackson.core.json.JsonWriteFeature.ESCAPE_NON_ASCII);
        Files.writeString(dir.resolve(file + ".java.json"), pretty.writeValueAsString(left));
        Files.writeString(dir.resolve(file + ".server.json"), pretty.writeValueAsString(right));
        Assertions.fail(scenario + ": the server differs from the Java class at "
                + firstDifference("", left, right) + " (both written to " + dir.resolve(file) + ".*.json)");
    }

    private static ObjectNode tree(Outcome o) {
        ObjectNode node = TREES.createObjectNode();
        node.set("compressed", TREES.valueToTree(o.compressed()));
        node.set("working", o.working());
        node.set("original", o.original());
        node.set("events", o.events());
        node.set("offloads", o.offloads());
        return node;
    }

    private static String firstDifference(String path, JsonNode a, JsonNode b) {
        if (a != null && b != null && a.isContainerNode() && a.getNodeType() == b.getNodeType()) {
            if (a.isArray()) {
                for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
                    if (!a.get(i).equals(b.get(i))) {
                        return firstDifference(path + "[" + i + "]", a.get(i), b.get(i));
                    }
                }
                return path + ": " + a.size() + " vs " + b.size() + " elements";
            }
            Set<String> names = new LinkedHashSet<>();
            a.fieldNames().forEachRemaining(names::add);
            b.fieldNames().forEachRemaining(names::add);
            for (String name : names) {
                if (!Objects.equals(a.get(name), b.get(name))) {
                    return firstDifference(path + "." + name, a.get(name), b.get(name));
                }
            }
        }
        return path + ": Java " + abbreviate(a) + " vs server " + abbreviate(b);
    }

    private static String abbreviate(JsonNode node) {
        String text = String.valueOf(node);
        return text.length() <= 300 ? text : text.substring(0, 300) + "...";
    }
}
