package dev.agentscopememory.client;

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
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Runs the same messages through the real {@code AutoContextMemory} and a {@link
 * RemoteAutoContextMemory} and reduces both to comparable JSON: working and original messages,
 * events and offloads, with offload uuids renamed {@code u1, u2, ...} in order of appearance and
 * the ids, timestamps and measured times of generated messages removed.
 */
final class AutoContextHarness {

    static final ObjectMapper TREES = new ObjectMapper();
    static final Pattern UUID_RE = Pattern.compile("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");

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
        final Map<String, String> names = new LinkedHashMap<>();

        String rename(String text) {
            Matcher m = UUID_RE.matcher(text);
            StringBuilder out = new StringBuilder();
            while (m.find()) {
                String name = names.computeIfAbsent(m.group(), k -> "u" + (names.size() + 1));
                m.appendReplacement(out, name);
            }
            m.appendTail(out);
            return out.toString();
        }
    }

    static JsonNode normalised(List<Msg> msgs, Uuids uuids) throws Exception {
        ArrayNode out = TREES.createArrayNode();
        for (Msg m : msgs) {
            ObjectNode node = (ObjectNode) TREES.readTree(uuids.rename(JsonUtils.getJsonCodec().toJson(m)));
            if (!node.path("id").asText("").startsWith("msg-")) {
                node.remove("id");
                node.remove("timestamp");
            }
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
            node.put("previous", e.getPreviousMessageId());
            node.put("next", e.getNextMessageId());
            node.put("compressedIsSet", e.getCompressedMessageId() != null);
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
        List<Boolean> compressed = new ArrayList<>();
        for (int i = 0; i < rounds; i++) {
            compressed.add(memory.compressIfNeeded());
        }
        Uuids uuids = new Uuids();
        JsonNode working = normalised(memory.getMessages(), uuids);
        JsonNode original = normalised(memory.getOriginalMemoryMsgs(), uuids);
        JsonNode events = events(memory.getCompressionEvents(), uuids);
        ObjectNode offloads = TREES.createObjectNode();
        for (String uuid : new ArrayList<>(uuids.names.keySet())) {
            offloads.set(uuids.rename(uuid), normalised(memory.reload(uuid), uuids));
        }
        return new Outcome(compressed, working, original, events, offloads);
    }

    /** The same on the server. */
    static Outcome remote(String target, AutoContextConfig config, List<Msg> input, int rounds) throws Exception {
        try (RemoteAutoContextMemory memory = RemoteAutoContextMemory.builder().target(target)
                .memoryId("ac-" + UUID.randomUUID()).config(config).deadline(java.time.Duration.ofSeconds(60)).build()) {
            memory.addMessages(input);
            List<Boolean> compressed = new ArrayList<>();
            for (int i = 0; i < rounds; i++) {
                compressed.add(memory.compressIfNeeded());
            }
            Uuids uuids = new Uuids();
            JsonNode working = normalised(memory.getMessages(), uuids);
            JsonNode original = normalised(memory.getOriginalMemoryMsgs(), uuids);
            JsonNode events = events(memory.getCompressionEvents(), uuids);
            ObjectNode offloads = TREES.createObjectNode();
            for (String uuid : new ArrayList<>(uuids.names.keySet())) {
                offloads.set(uuids.rename(uuid), normalised(memory.reload(uuid), uuids));
            }
            return new Outcome(compressed, working, original, events, offloads);
        }
    }

    /** A summariser for the Java side answering like the scripted LLM endpoint. */
    static Supplier<Model> summariser(String text) {
        return () -> new ScriptedModel(null) {
            @Override
            public synchronized reactor.core.publisher.Flux<io.agentscope.core.model.ChatResponse> stream(
                    List<Msg> messages, List<io.agentscope.core.model.ToolSchema> tools,
                    io.agentscope.core.model.GenerateOptions options) {
                return reactor.core.publisher.Flux.just(io.agentscope.core.model.ChatResponse.builder()
                        .id("summary").content(List.of(TextBlock.builder().text(text).build()))
                        .usage(new io.agentscope.core.model.ChatUsage(10, 20, 30.0)).build());
            }
        };
    }

    static String describe(Outcome o) {
        return "compressed=" + o.compressed() + "\nworking=" + o.working() + "\nevents=" + o.events();
    }
}
