package dev.agentscopememory.client.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.agentscopememory.grpc.v1.AudioBlock;
import dev.agentscopememory.grpc.v1.Base64Source;
import dev.agentscopememory.grpc.v1.ContentBlock;
import dev.agentscopememory.grpc.v1.ImageBlock;
import dev.agentscopememory.grpc.v1.Msg;
import dev.agentscopememory.grpc.v1.Source;
import dev.agentscopememory.grpc.v1.TextBlock;
import dev.agentscopememory.grpc.v1.ThinkingBlock;
import dev.agentscopememory.grpc.v1.ToolResultBlock;
import dev.agentscopememory.grpc.v1.ToolUseBlock;
import dev.agentscopememory.grpc.v1.UrlSource;
import dev.agentscopememory.grpc.v1.VideoBlock;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The mapping between AgentScope-Java's JSON shape of a message (the object its Jackson codec,
 * {@code JsonUtils.getJsonCodec()}, writes for a {@code Msg}: what JsonSession stores) and the
 * wire {@code Msg}, both ways, as Jackson trees. Not public API: it is public only so the adapter
 * modules can use it, and may change in any release.
 *
 * <p>It names no AgentScope type, so one mapping serves both majors: each adapter's
 * {@code MsgConverter} only runs AgentScope's codec between its {@code Msg} and the tree. Free-form
 * maps (message and block metadata, tool input) travel as the codec's JSON text, so integers stay
 * integers and nulls stay nulls exactly as in Java. Because the mapping is done on the JSON shape,
 * fields a given AgentScope release does not have (the 1.0.12 image and video size options on
 * older releases) are simply absent rather than a compile-time dependency. What one major has and
 * the wire has no field for is a {@link Dialect}.
 *
 * <p>Jackson is an optional dependency of core (both AgentScope majors bring it): an application
 * on core alone never loads this class.
 */
public final class WireJson {

    /**
     * Which AgentScope major's messages a tree holds: the block kinds the wire {@code Msg}
     * (AgentScope-Java 1.0.12's) has no block for, and how they go to the wire. Reading from the
     * wire is the same for both (2.x reads 1.0.12's JSON).
     */
    public enum Dialect {
        /** AgentScope-Java 1.x: every block kind it has, the wire has; any other is refused. */
        AGENTSCOPE_1(false, false),
        /**
         * AgentScope-Java 2.x: a {@code hint} block goes as a text block holding its hint (so the
         * server counts and summarises what the model reads); a {@code data} block (an opaque
         * attachment, which the server has no block for) is left out.
         */
        AGENTSCOPE_2(true, true);

        private final boolean hintAsText;
        private final boolean leavesOutData;

        Dialect(boolean hintAsText, boolean leavesOutData) {
            this.hintAsText = hintAsText;
            this.leavesOutData = leavesOutData;
        }

        /** Whether {@code block} (an element of a content or output list) stays off the wire. */
        private boolean leavesOut(JsonNode block) {
            return block.isNull() || leavesOutData && "data".equals(text(block, "type"));
        }
    }

    /** Plain JSON syntax only (trees to text and back); POJO binding is left to AgentScope's codec. */
    private static final ObjectMapper TREES = new ObjectMapper();

    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private static final Logger log = LoggerFactory.getLogger(WireJson.class);

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

    private WireJson() {}

    // ---------------------------------------------------------------- JSON -> proto

    /**
     * Converts a message given as AgentScope JSON (the object AgentScope's codec writes for a
     * {@code Msg}) to its wire form.
     *
     * @param json the message's JSON object
     * @param dialect the AgentScope major it was written by
     * @return the wire message
     * @throws IllegalArgumentException naming the field when the JSON is not a message the wire
     *     can hold (an unknown block or source type, a lone surrogate, ...)
     */
    public static Msg toProto(JsonNode json, Dialect dialect) {
        if (json == null || !json.isObject()) {
            throw new IllegalArgumentException("msg: must be a JSON object");
        }
        checkNoLoneSurrogate(json, "");
        Msg.Builder out = Msg.newBuilder();
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
                if (!dialect.leavesOut(block)) {
                    out.addContent(blockToProto(block, "content[" + i + "]", dialect));
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

    private static ContentBlock blockToProto(JsonNode block, String where, Dialect dialect) {
        String type = text(block, "type");
        if (type == null) {
            throw new IllegalArgumentException(where + ".type: missing");
        }
        ContentBlock.Builder out = ContentBlock.newBuilder();
        switch (type) {
            case "text" -> out.setText(TextBlock.newBuilder().setText(orEmpty(text(block, "text"))));
            // 2.x only: what the model reads of a hint is its text.
            case "hint" -> {
                if (!dialect.hintAsText) {
                    throw unknownBlockType(where, type);
                }
                out.setText(TextBlock.newBuilder().setText(orEmpty(text(block, "hint"))));
            }
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
                        if (!dialect.leavesOut(inner)) {
                            b.addOutput(blockToProto(inner, where + ".output[" + i + "]", dialect));
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
            default -> throw unknownBlockType(where, type);
        }
        return out.build();
    }

    private static IllegalArgumentException unknownBlockType(String where, String type) {
        return new IllegalArgumentException(where + ".type: unknown block type '" + type + "'");
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

    // ---------------------------------------------------------------- proto -> JSON

    /**
     * Converts a wire message to the JSON object AgentScope-Java 1.0.12 writes for it (field
     * order {@code id, name, role, content, metadata, timestamp}; nulls written), which 2.x's
     * codec reads too.
     *
     * @param msg the wire message
     * @return its AgentScope JSON
     * @throws IllegalArgumentException naming the field when the message holds JSON text that is
     *     not an object, or a block or source with no kind set
     */
    public static ObjectNode toJson(Msg msg) {
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
     * by newer clients) may hold block kinds AgentScope-Java has no class for; failing the read,
     * as Jackson does on an unknown {@code "type"}, would make the whole conversation unreadable
     * to this agent for one block it could never show its model anyway. So the message comes
     * without it (the server keeps it), with a warning once per kind: a message read here and
     * stored again (a {@code saveTo} then {@code loadFrom}) is stored without it.
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
     *
     * @param node the JSON to check, keys and values, all the way down
     * @param path where {@code node} is, which starts the message ({@code ""} for a message)
     * @throws IllegalArgumentException naming the field when a string or key holds a lone surrogate
     */
    public static void checkNoLoneSurrogate(JsonNode node, String path) {
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

    /**
     * The tree of JSON text that AgentScope's codec wrote.
     *
     * @param json the codec's output
     * @return its tree
     * @throws IllegalStateException when it is not JSON (a codec fault, not the caller's)
     */
    public static JsonNode codecTree(String json) {
        try {
            return TREES.readTree(json);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("AgentScope's codec wrote invalid JSON", e);
        }
    }

    /**
     * Compact JSON text of a tree.
     *
     * @param node the tree
     * @return its JSON text
     */
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
