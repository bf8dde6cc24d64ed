package dev.agentscopememory.agentscope2.internal;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.agentscopememory.client.internal.WireJson;
import io.agentscope.core.message.Msg;
import io.agentscope.core.util.JsonUtils;
import java.util.ArrayList;
import java.util.List;

/**
 * The conversion between AgentScope-Java 2.x's {@link Msg} and the wire {@code Msg}, both ways,
 * through AgentScope's own codec ({@link JsonUtils#getJsonCodec()}) and core's {@link WireJson}
 * mapping of its JSON, which agentscope1's converter shares. Not public API (it names generated
 * types and may change in any release).
 *
 * <p>2.x messages hold what the wire {@code Msg} (AgentScope-Java 1.0.12's) has no field for: a
 * {@code usage}, {@code hint} and {@code data} blocks, block ids. Going to the wire, a hint block
 * becomes a text block holding its hint (so the server counts and summarises what the model
 * reads), a data block is left out (the server has no block for an opaque attachment), and the
 * rest is dropped as any unknown JSON field is ({@link WireJson.Dialect#AGENTSCOPE_2}). An
 * adapter that must keep those parts keeps the agent's own {@code Msg} and sends only this wire
 * copy.
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
        return WireJson.toProto(json, WireJson.Dialect.AGENTSCOPE_2);
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
     * Converts a wire message to the JSON object AgentScope-Java 1.0.12 writes for it, which 2.x
     * reads (field order {@code id, name, role, content, metadata, timestamp}; nulls written).
     */
    public static ObjectNode toJson(dev.agentscopememory.grpc.v1.Msg msg) {
        return WireJson.toJson(msg);
    }

    /** Compact JSON text of a tree. */
    public static String write(JsonNode node) {
        return WireJson.write(node);
    }
}
