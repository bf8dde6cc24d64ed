package dev.agentscopememory.agentscope2.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.agentscopememory.client.internal.Utf16;
import dev.agentscopememory.client.internal.WireEnums;
import dev.agentscopememory.grpc.v1.AudioBlock;
import dev.agentscopememory.grpc.v1.Base64Source;
import dev.agentscopememory.grpc.v1.ContentBlock;
import dev.agentscopememory.grpc.v1.ImageBlock;
import dev.agentscopememory.grpc.v1.Role;
import dev.agentscopememory.grpc.v1.Source;
import dev.agentscopememory.grpc.v1.TextBlock;
import dev.agentscopememory.grpc.v1.ThinkingBlock;
import dev.agentscopememory.grpc.v1.ToolResultBlock;
import dev.agentscopememory.grpc.v1.ToolUseBlock;
import dev.agentscopememory.grpc.v1.UrlSource;
import dev.agentscopememory.grpc.v1.VideoBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.util.JsonUtils;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The conversion between AgentScope-Java 2.x's {@link Msg} and the wire {@code Msg}, both ways:
 * agentscope1's converter (the same JSON-shape mapping through AgentScope's own codec, {@link
 * JsonUtils#getJsonCodec()}), built against 2.x. Not public API (it names generated types and may
 * change in any release).
 *
 * <p>2.x messages hold what the wire {@code Msg} (AgentScope-Java 1.0.12's) has no field for: a
 * {@code usage}, {@code hint} and {@code data} blocks, block ids. Going to the wire, a hint block
 * becomes a text block holding its hint (so the server counts and summarises what the model
 * reads), a data block is left out (the server has no block for an opaque attachment), and the
 * rest is dropped as any unknown JSON field is. An adapter that must keep those parts keeps the
 * agent's own {@code Msg} and sends only this wire copy.
 */
public final class MsgConverter {

    /** Plain JSON syntax only (trees to text and back); POJO binding is left to the codec. */
    private static final ObjectMapper TREES = new ObjectMapper();

    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private static final Logger log = LoggerFactory.getLogger(MsgConverter.class);

    /**
     * The metadata key under which a message read with a role number this client does not know (a
     * newer server's) keeps that number; the message itself is read as {@code USER}. The Python
     * client uses the same key.
     */
    public static final String UNKNOWN_ROLE_KEY = "agentscope_memory_unknown_role";

    /**
     * The unknown block and source kinds already warned about (by their field numbers), so a
     * history full of them logs once per kind, not once per read; bounded, as a server chooses
     * the numbers.
     */
    private static final Set<String> WARNED_KINDS = ConcurrentHashMap.newKeySet();

    private static final int MAX_WARNED_KINDS = 64;

    private MsgConverter() {}

    // ---------------------------------------------------------------- Java -> proto

    /** Converts an AgentScope message to its wire form. */
    public static dev.agentscopememory.grpc.v1.Msg toProto(Msg msg) {
        if (msg == null) {
            throw new IllegalArgumentException("msg: must not be null");
        }
        return toProto(javaTree(msg));
    }

    /** Converts AgentScope messages to their wire form, in order. */
    public static List<dev.agentscopememory.grpc.v1.Msg> toProto(List<Msg> msgs) {
        List<dev.agentscopememory.grpc.v1.Msg> out = new ArrayList<>(msgs.size());
        for (Msg msg : msgs) {
            out.add(toProto(msg));
        }
        return out;
    }

    /**
     * Converts a message given as AgentScope JSON (the object Jackson writes for a {@code Msg}) to
     * its wire form.
     */
    public static dev.agentscopememory.grpc.v1.Msg toProto(JsonNode json) {
        if (json == null || !json.isObject()) {
            throw new IllegalArgumentException("msg: must be a JSON object");
        }
        checkNoLoneSurrogate(json, "");
        dev.agentscopememory.grpc.v1.Msg.Builder out = dev.agentscopememory.grpc.v1.Msg.newBuilder();
        String id = text(json, "id");
        if (id != null) {
            out.setId(id);
        }
        String name = text(json, "name");
        if (name != null) {
            out.setName(name);
        }
        out.setRole(WireEnums.roleToProto(text(json, "role")));
        JsonNode content = json.get("content");
        if (content != null && content.isArray()) {
            int i = 0;
            for (JsonNode block : content) {
                if (!block.isNull() && !"data".equals(text(block, "type"))) {
                    out.addContent(blockToProto(block, "content[" + i + "]"));
                }
                i++;
            }
        }
        out.setMetadataJson(objectText(json.get("metadata")));
        String timestamp = text(json, "timestamp");
        if (timestamp != null) {
            out.setTimestamp(timestamp);
        }
        return out.build();
    }

    private static ContentBlock blockToProto(JsonNode block, String where) {
        String type = text(block, "type");
        if (type == null) {
            throw new IllegalArgumentException(where + ".type: missing");
        }
        ContentBlock.Builder out = ContentBlock.newBuilder();
        switch (type) {
            case "text" -> out.setText(TextBlock.newBuilder().setText(orEmpty(text(block, "text"))));
            // 2.x only: what the model reads of a hint is its text.
            case "hint" -> out.setText(TextBlock.newBuilder().setText(orEmpty(text(block, "hint"))));
            case "thinking" -> {
                ThinkingBlock.Builder b =
                        ThinkingBlock.newBuilder().setThinking(orEmpty(text(block, "thinking")));
                JsonNode metadata = block.get("metadata");
                if (metadata != null && !metadata.isNull()) {
                    b.setMetadataJson(write(metadata));
                }
                out.setThinking(b);
            }
            case "tool_use" -> {
                ToolUseBlock.Builder b = ToolUseBlock.newBuilder();
                String id = text(block, "id");
                if (id != null) {
                    b.setId(id);
                }
                String name = text(block, "name");
                if (name != null) {
                    b.setName(name);
                }
                b.setInputJson(objectText(block.get("input")));
                String raw = text(block, "content");
                if (raw != null) {
                    b.setContent(raw);
                }
                b.setMetadataJson(objectText(block.get("metadata")));
                out.setToolUse(b);
            }
            case "tool_result" -> {
                ToolResultBlock.Builder b = ToolResultBlock.newBuilder();
                String id = text(block, "id");
                if (id != null) {
                    b.setId(id);
                }
                String name = text(block, "name");
                if (name != null) {
                    b.setName(name);
                }
                JsonNode output = block.get("output");
                if (output != null && output.isArray()) {
                    int i = 0;
                    for (JsonNode inner : output) {
                        if (!inner.isNull() && !"data".equals(text(inner, "type"))) {
                            b.addOutput(blockToProto(inner, where + ".output[" + i + "]"));
                        }
                        i++;
                    }
                }
                b.setMetadataJson(objectText(block.get("metadata")));
                out.setToolResult(b);
            }
            case "image" -> {
                ImageBlock.Builder b = ImageBlock.newBuilder()
                        .setSource(sourceToProto(block.get("source"), where + ".source"));
                Integer min = intOption(block, "minPixels", "min_pixels");
                if (min != null) {
                    b.setMinPixels(min);
                }
                Integer max = intOption(block, "maxPixels", "max_pixels");
                if (max != null) {
                    b.setMaxPixels(max);
                }
                out.setImage(b);
            }
            case "audio" -> out.setAudio(AudioBlock.newBuilder()
                    .setSource(sourceToProto(block.get("source"), where + ".source")));
            case "video" -> {
                VideoBlock.Builder b = VideoBlock.newBuilder();
                JsonNode source = block.get("source");
                if (source != null && !source.isNull()) {
                    b.setSource(sourceToProto(source, where + ".source"));
                }
                JsonNode fps = block.get("fps");
                if (fps != null && fps.isNumber()) {
                    b.setFps(fps.floatValue());
                }
                Integer maxFrames = intOption(block, "maxFrames", "max_frames");
                if (maxFrames != null) {
                    b.setMaxFrames(maxFrames);
                }
                Integer min = intOption(block, "minPixels", "min_pixels");
                if (min != null) {
                    b.setMinPixels(min);
                }
                Integer max = intOption(block, "maxPixels", "max_pixels");
                if (max != null) {
                    b.setMaxPixels(max);
                }
                Integer total = intOption(block, "totalPixels", "total_pixels");
                if (total != null) {
                    b.setTotalPixels(total);
                }
                out.setVideo(b);
            }
            default -> throw new IllegalArgumentException(
                    where + ".type: unknown block type '" + type + "'");
        }
        return out.build();
    }

    private static Source sourceToProto(JsonNode source, String where) {
        if (source == null || source.isNull()) {
            throw new IllegalArgumentException(where + ": must not be null");
        }
        String type = text(source, "type");
        if ("url".equals(type)) {
            return Source.newBuilder()
                    .setUrl(UrlSource.newBuilder().setUrl(orEmpty(text(source, "url"))))
                    .build();
        }
        if ("base64".equals(type)) {
            return Source.newBuilder()
                    .setBase64(Base64Source.newBuilder()
                            .setMediaType(orEmpty(text(source, "media_type")))
                            .setData(orEmpty(text(source, "data"))))
                    .build();
        }
        throw new IllegalArgumentException(where + ".type: unknown source type '" + type + "'");
    }

    // ---------------------------------------------------------------- proto -> Java

    /** Converts a wire message to an AgentScope message. */
    public static Msg fromProto(dev.agentscopememory.grpc.v1.Msg msg) {
        return JsonUtils.getJsonCodec().fromJson(write(toJson(msg)), Msg.class);
    }

    /** Converts wire messages to AgentScope messages, in order, into a new mutable list. */
    public static List<Msg> fromProto(List<dev.agentscopememory.grpc.v1.Msg> msgs) {
        List<Msg> out = new ArrayList<>(msgs.size());
        for (dev.agentscopememory.grpc.v1.Msg msg : msgs) {
            out.add(fromProto(msg));
        }
        return out;
    }

    /**
     * Converts a wire message to the JSON object AgentScope-Java 1.0.12 writes for it (2.x reads it) (field
     * order {@code id, name, role, content, metadata, timestamp}; nulls written).
     */
    public static ObjectNode toJson(dev.agentscopememory.grpc.v1.Msg msg) {
        ObjectNode out = NODES.objectNode();
        putOptional(out, "id", msg.hasId(), msg.getId());
        putOptional(out, "name", msg.hasName(), msg.getName());
        boolean newerRole = false;
        switch (msg.getRole()) {
            case ROLE_USER -> out.put("role", "USER");
            case ROLE_ASSISTANT -> out.put("role", "ASSISTANT");
            case ROLE_SYSTEM -> out.put("role", "SYSTEM");
            case ROLE_TOOL -> out.put("role", "TOOL");
            case ROLE_UNSPECIFIED -> out.putNull("role");
            default -> {
                // A role a newer server has (UNRECOGNIZED here): failing would fail the whole
                // read of a conversation newer agents share, so the message is kept as USER
                // (AgentScope's default role, which every formatter handles) with the number
                // in its metadata, as the Python client does.
                out.put("role", "USER");
                newerRole = true;
                String kind = "role " + msg.getRoleValue();
                if (WARNED_KINDS.size() < MAX_WARNED_KINDS && WARNED_KINDS.add(kind)) {
                    log.warn("a message with a role this client does not know ({}, written by a newer client?) is "
                            + "read as USER, its number kept in metadata {}; upgrade the client to see it",
                            msg.getRoleValue(), UNKNOWN_ROLE_KEY);
                }
            }
        }
        ArrayNode content = out.putArray("content");
        for (int i = 0; i < msg.getContentCount(); i++) {
            addKnown(content, msg.getContent(i), "content[" + i + "]");
        }
        JsonNode metadata = objectTree(msg.getMetadataJson(), "metadata_json");
        if (newerRole) {
            ((ObjectNode) metadata).put(UNKNOWN_ROLE_KEY, msg.getRoleValue());
        }
        out.set("metadata", metadata);
        putOptional(out, "timestamp", msg.hasTimestamp(), msg.getTimestamp());
        return out;
    }

    /**
     * Adds the JSON of {@code block} to {@code blocks}, or leaves out a block of a kind (or a
     * media block with a source of a kind) this client does not know. A newer server (written to
     * by newer clients) may hold block kinds AgentScope-Java 2.x has no class for; failing the
     * read, as Jackson does on an unknown {@code "type"}, would make the whole conversation
     * unreadable to this agent for one block it could never show its model anyway. So the
     * message comes without it (the server keeps it), with a warning once per kind: a message
     * read here and stored again (a {@code saveTo} then {@code loadFrom}) is stored without it.
     */
    private static void addKnown(ArrayNode blocks, ContentBlock block, String where) {
        String newer = newerKind(block, where);
        if (newer == null) {
            blocks.add(blockToJson(block, where));
            return;
        }
        if (WARNED_KINDS.size() < MAX_WARNED_KINDS && WARNED_KINDS.add(newer)) {
            log.warn("{}: a content block with a {} this client does not know (written by a newer client?) "
                    + "is left out of the message it reads; upgrade the client to see it", where, newer);
        }
    }

    /**
     * What of {@code block} is of a kind newer than this client's stubs (a oneof case they have no
     * name for arrives as an unknown field, with no case set), or null when it is all known. A
     * block or source with no case and nothing unknown is not newer but empty: an error.
     */
    private static String newerKind(ContentBlock block, String where) {
        if (block.getBlockCase() == ContentBlock.BlockCase.BLOCK_NOT_SET) {
            if (block.getUnknownFields().asMap().isEmpty()) {
                throw new IllegalArgumentException(where + ": no block kind is set");
            }
            return "kind (ContentBlock field " + block.getUnknownFields().asMap().keySet() + ")";
        }
        Source source = switch (block.getBlockCase()) {
            case IMAGE -> block.getImage().hasSource() ? block.getImage().getSource() : null;
            case AUDIO -> block.getAudio().hasSource() ? block.getAudio().getSource() : null;
            case VIDEO -> block.getVideo().hasSource() ? block.getVideo().getSource() : null;
            default -> null;
        };
        if (source != null && source.getSourceCase() == Source.SourceCase.SOURCE_NOT_SET
                && !source.getUnknownFields().asMap().isEmpty()) {
            return "source kind (Source field " + source.getUnknownFields().asMap().keySet() + ")";
        }
        return null;
    }

    private static ObjectNode blockToJson(ContentBlock block, String where) {
        ObjectNode out = NODES.objectNode();
        switch (block.getBlockCase()) {
            case TEXT -> {
                out.put("type", "text");
                out.put("text", block.getText().getText());
            }
            case THINKING -> {
                ThinkingBlock b = block.getThinking();
                out.put("type", "thinking");
                out.put("thinking", b.getThinking());
                if (b.hasMetadataJson()) {
                    out.set("metadata", objectTree(b.getMetadataJson(), where + ".metadata_json"));
                } else {
                    out.putNull("metadata");
                }
            }
            case TOOL_USE -> {
                ToolUseBlock b = block.getToolUse();
                out.put("type", "tool_use");
                putOptional(out, "id", b.hasId(), b.getId());
                putOptional(out, "name", b.hasName(), b.getName());
                out.set("input", objectTree(b.getInputJson(), where + ".input_json"));
                putOptional(out, "content", b.hasContent(), b.getContent());
                out.set("metadata", objectTree(b.getMetadataJson(), where + ".metadata_json"));
            }
            case TOOL_RESULT -> {
                ToolResultBlock b = block.getToolResult();
                out.put("type", "tool_result");
                putOptional(out, "id", b.hasId(), b.getId());
                putOptional(out, "name", b.hasName(), b.getName());
                ArrayNode output = out.putArray("output");
                for (int i = 0; i < b.getOutputCount(); i++) {
                    addKnown(output, b.getOutput(i), where + ".output[" + i + "]");
                }
                out.set("metadata", objectTree(b.getMetadataJson(), where + ".metadata_json"));
            }
            case IMAGE -> {
                ImageBlock b = block.getImage();
                out.put("type", "image");
                out.set("source", sourceToJson(b.hasSource() ? b.getSource() : null, where + ".source"));
                if (b.hasMinPixels()) {
                    out.put("minPixels", b.getMinPixels());
                }
                if (b.hasMaxPixels()) {
                    out.put("maxPixels", b.getMaxPixels());
                }
            }
            case AUDIO -> {
                AudioBlock b = block.getAudio();
                out.put("type", "audio");
                out.set("source", sourceToJson(b.hasSource() ? b.getSource() : null, where + ".source"));
            }
            case VIDEO -> {
                VideoBlock b = block.getVideo();
                out.put("type", "video");
                if (b.hasSource()) {
                    out.set("source", sourceToJson(b.getSource(), where + ".source"));
                }
                if (b.hasFps()) {
                    out.put("fps", b.getFps());
                }
                if (b.hasMaxFrames()) {
                    out.put("maxFrames", b.getMaxFrames());
                }
                if (b.hasMinPixels()) {
                    out.put("minPixels", b.getMinPixels());
                }
                if (b.hasMaxPixels()) {
                    out.put("maxPixels", b.getMaxPixels());
                }
                if (b.hasTotalPixels()) {
                    out.put("totalPixels", b.getTotalPixels());
                }
            }
            case BLOCK_NOT_SET -> throw new IllegalStateException(where + ": no block kind is set (see addKnown)");
        }
        return out;
    }

    private static ObjectNode sourceToJson(Source source, String where) {
        if (source == null) {
            throw new IllegalArgumentException(where + ": must be set");
        }
        ObjectNode out = NODES.objectNode();
        switch (source.getSourceCase()) {
            case URL -> {
                out.put("type", "url");
                out.put("url", source.getUrl().getUrl());
            }
            case BASE64 -> {
                out.put("type", "base64");
                out.put("media_type", source.getBase64().getMediaType());
                out.put("data", source.getBase64().getData());
            }
            case SOURCE_NOT_SET -> throw new IllegalArgumentException(where + ": no source kind is set");
        }
        return out;
    }

    // ---------------------------------------------------------------- JSON helpers

    /**
     * Refuses a string holding half a surrogate pair (a model's stream cut inside an emoji, say):
     * UTF-8 has no encoding for it, and protobuf would silently send {@code '?'} in its place, so
     * the stored message would differ from the one added. The message names the field, as the
     * server's do, and the character, as {@code Ids} does for ids.
     */
    private static void checkNoLoneSurrogate(JsonNode node, String path) {
        if (node.isTextual()) {
            int at = Utf16.loneSurrogateAt(node.textValue());
            if (at >= 0) {
                throw new IllegalArgumentException(path + ": contains a lone surrogate at character "
                        + node.textValue().codePointCount(0, at) + "; it is not Unicode text and cannot be stored");
            }
        } else if (node.isArray()) {
            for (int i = 0; i < node.size(); i++) {
                checkNoLoneSurrogate(node.get(i), path + "[" + i + "]");
            }
        } else if (node.isObject()) {
            for (Map.Entry<String, JsonNode> field : node.properties()) {
                String where = path.isEmpty() ? field.getKey() : path + "." + field.getKey();
                if (Utf16.loneSurrogateAt(field.getKey()) >= 0) {
                    throw new IllegalArgumentException((path.isEmpty() ? "msg" : path)
                            + ": a key contains a lone surrogate; it is not Unicode text and cannot be stored");
                }
                checkNoLoneSurrogate(field.getValue(), where);
            }
        }
    }

    /** The JSON AgentScope's codec writes for a message, as a tree. */
    private static JsonNode javaTree(Object value) {
        try {
            return TREES.readTree(JsonUtils.getJsonCodec().toJson(value));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("AgentScope's codec wrote invalid JSON", e);
        }
    }

    /** Compact JSON text of a tree. */
    public static String write(JsonNode node) {
        try {
            return TREES.writeValueAsString(node);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot write JSON", e);
        }
    }

    private static JsonNode objectTree(String text, String field) {
        if (text == null || text.isEmpty()) {
            return NODES.objectNode();
        }
        JsonNode node;
        try {
            node = TREES.readTree(text);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(field + ": not valid JSON: " + e.getOriginalMessage(), e);
        }
        if (node == null || !node.isObject()) {
            throw new IllegalArgumentException(field + ": must be a JSON object");
        }
        return node;
    }

    /** A map field Java always writes ({@code {}} when empty); null or absent counts as empty. */
    private static String objectText(JsonNode node) {
        if (node == null || node.isNull()) {
            return "{}";
        }
        return write(node);
    }

    private static String text(JsonNode node, String field) {
        JsonNode value = node.get(field);
        return value == null || value.isNull() ? null : value.asText();
    }

    private static String orEmpty(String s) {
        return s == null ? "" : s;
    }

    private static Integer intOption(JsonNode node, String camel, String snake) {
        JsonNode value = node.get(camel);
        if (value == null || value.isNull()) {
            value = node.get(snake);
        }
        return value == null || value.isNull() ? null : value.intValue();
    }

    private static void putOptional(ObjectNode out, String field, boolean present, String value) {
        if (present) {
            out.put(field, value);
        } else {
            out.putNull(field);
        }
    }
}
