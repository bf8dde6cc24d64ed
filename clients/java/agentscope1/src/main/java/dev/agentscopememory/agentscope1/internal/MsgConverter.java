package dev.agentscopememory.agentscope1.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.agentscopememory.client.internal.Utf16;
import dev.agentscopememory.client.internal.WireJson;
import io.agentscope.core.message.Msg;
import io.agentscope.core.util.JsonUtils;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The one conversion between AgentScope-Java 1.x's {@link Msg} and the wire {@code Msg}, both
 * ways. Not public API (it names generated types and may change in any release): the adapters
 * convert for their users.
 *
 * <p>It goes through AgentScope's own Jackson codec ({@link JsonUtils#getJsonCodec()}): a Java
 * message is first written as AgentScope writes it (the JSON JsonSession stores), and core's
 * {@link WireJson} maps that JSON field by field onto the proto; the reverse builds the same JSON
 * and lets the codec read it. The mapping names no AgentScope type, so agentscope2's converter
 * shares it; this class holds only the codec calls and the 1.x-only helpers.
 */
public final class MsgConverter {

    /**
     * The metadata key under which a message read with a role number this client does not know (a
     * newer server's) keeps that number; the message itself is read as {@code USER}. The Python
     * client uses the same key.
     */
    public static final String UNKNOWN_ROLE_KEY = WireJson.UNKNOWN_ROLE_KEY;

    private MsgConverter() {}

    // ---------------------------------------------------------------- Java -> proto

    /** Converts an AgentScope message to its wire form. */
    public static dev.agentscopememory.grpc.v1.Msg toProto(Msg msg) {
        if (msg == null) {
            throw new IllegalArgumentException("msg: must not be null");
        }
        return toProto(WireJson.codecTree(JsonUtils.getJsonCodec().toJson(msg)));
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
        return WireJson.toProto(json, WireJson.Dialect.AGENTSCOPE_1);
    }

    // ---------------------------------------------------------------- proto -> Java

    /** Converts a wire message to an AgentScope message. */
    public static Msg fromProto(dev.agentscopememory.grpc.v1.Msg msg) {
        return JsonUtils.getJsonCodec().fromJson(WireJson.write(WireJson.toJson(msg)), Msg.class);
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
     * Converts a wire message to the JSON object AgentScope-Java 1.0.12 writes for it (field
     * order {@code id, name, role, content, metadata, timestamp}; nulls written).
     */
    public static ObjectNode toJson(dev.agentscopememory.grpc.v1.Msg msg) {
        return WireJson.toJson(msg);
    }

    // ---------------------------------------------------------------- JSON helpers

    /**
     * The JSON AgentScope's codec writes for an item of a session entry (a message, an event...),
     * refused when it holds half a surrogate pair, naming {@code where} and the field. Such text
     * comes from a session file holding an escape like {@code "\ud800"}: Jackson reads it into
     * half a character (AgentScope's JsonSession then cannot write it back), and protobuf would
     * send {@code '?'} in its place, so the server would store other text than the session's.
     *
     * @param value the item
     * @param where its place, e.g. {@code memory_messages[3]}
     * @return its JSON
     * @throws IllegalArgumentException when it holds a lone surrogate
     */
    public static String stateJson(Object value, String where) {
        String json = JsonUtils.getJsonCodec().toJson(value);
        if (Utf16.loneSurrogateAt(json) >= 0) {
            WireJson.checkNoLoneSurrogate(WireJson.codecTree(json), where);
        }
        return json;
    }

    /** Compact JSON text of a tree. */
    public static String write(JsonNode node) {
        return WireJson.write(node);
    }

    /** Reads a metadata-style JSON object with AgentScope's codec. */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> codecMap(String json) {
        return JsonUtils.getJsonCodec().fromJson(json, Map.class);
    }
}
