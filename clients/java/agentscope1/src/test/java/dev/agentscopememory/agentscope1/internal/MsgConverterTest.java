package dev.agentscopememory.agentscope1.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.agentscope1.SampleMessages;
import dev.agentscopememory.grpc.v1.ContentBlock;
import dev.agentscopememory.grpc.v1.Role;
import io.agentscope.core.message.Msg;
import io.agentscope.core.util.JsonUtils;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class MsgConverterTest {

    private static final ObjectMapper TREES = new ObjectMapper();

    static Stream<Arguments> samples() {
        return SampleMessages.all().entrySet().stream().map(e -> Arguments.of(e.getKey(), e.getValue()));
    }

    static JsonNode jackson(Object value) throws Exception {
        return TREES.readTree(JsonUtils.getJsonCodec().toJson(value));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("samples")
    void roundTripKeepsJacksonJson(String name, Msg original) throws Exception {
        dev.agentscopememory.grpc.v1.Msg wire = MsgConverter.toProto(original);
        // Through the bytes too, as on a real call.
        wire = dev.agentscopememory.grpc.v1.Msg.parseFrom(wire.toByteArray());
        Msg back = MsgConverter.fromProto(wire);
        assertEquals(jackson(original), jackson(back), name);
    }

    @Test
    void nullsAreAbsentOnTheWire() {
        Msg msg = SampleMessages.all().get("null name, role, timestamp and id");
        dev.agentscopememory.grpc.v1.Msg wire = MsgConverter.toProto(msg);
        assertFalse(wire.hasId());
        assertFalse(wire.hasName());
        assertFalse(wire.hasTimestamp());
        assertEquals(Role.ROLE_UNSPECIFIED, wire.getRole());
        assertEquals("{}", wire.getMetadataJson());
    }

    @Test
    void freeFormMapsTravelAsCodecJson() throws Exception {
        Msg msg = SampleMessages.all().get("metadata types");
        dev.agentscopememory.grpc.v1.Msg wire = MsgConverter.toProto(msg);
        JsonNode meta = TREES.readTree(wire.getMetadataJson());
        assertTrue(meta.get("int").isInt());
        assertTrue(meta.get("long").isLong());
        assertEquals(9007199254740993L, meta.get("long").longValue());
        assertTrue(meta.get("whole double").isDouble());
        assertEquals("MAX_ITERATIONS", meta.get("agentscope_generate_reason").asText());
        Msg back = MsgConverter.fromProto(wire);
        assertEquals(Integer.class, back.getMetadata().get("int").getClass());
        assertEquals(Long.class, back.getMetadata().get("long").getClass());
        assertEquals(Double.class, back.getMetadata().get("whole double").getClass());
    }

    @Test
    void toolBlocksKeepNullsAndSuspension() {
        dev.agentscopememory.grpc.v1.Msg noContent = MsgConverter.toProto(SampleMessages.all().get("tool_use without content"));
        assertFalse(noContent.getContent(0).getToolUse().hasContent());
        dev.agentscopememory.grpc.v1.Msg withContent = MsgConverter.toProto(SampleMessages.all().get("tool_use with content"));
        assertEquals("{\"city\":\"Paris\"}", withContent.getContent(0).getToolUse().getContent());
        assertEquals("{\"thoughtSignature\":\"abc\"}", withContent.getContent(0).getToolUse().getMetadataJson());

        Msg suspended = MsgConverter.fromProto(MsgConverter.toProto(SampleMessages.all().get("tool_result suspended")));
        assertTrue(((io.agentscope.core.message.ToolResultBlock) suspended.getContent().get(0)).isSuspended());

        dev.agentscopememory.grpc.v1.Msg nulls = MsgConverter.toProto(SampleMessages.all().get("tool_result null id and name"));
        assertFalse(nulls.getContent(0).getToolResult().hasId());
        assertFalse(nulls.getContent(0).getToolResult().hasName());

        dev.agentscopememory.grpc.v1.Msg thinking = MsgConverter.toProto(SampleMessages.all().get("thinking without metadata"));
        assertFalse(thinking.getContent(0).getThinking().hasMetadataJson());
    }

    /** The 1.0.12 size options map both ways at the JSON level, whatever release is on the classpath. */
    @Test
    void sizeOptionsMapExactly() throws Exception {
        String json = "{\"id\":\"m\",\"name\":null,\"role\":\"USER\",\"content\":["
                + "{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://e/a.png\"},\"minPixels\":100,\"maxPixels\":2000},"
                + "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgo=\"}},"
                + "{\"type\":\"video\",\"source\":{\"type\":\"url\",\"url\":\"https://e/v.mp4\"},\"fps\":2.5,\"maxFrames\":10,\"minPixels\":1,\"maxPixels\":2,\"totalPixels\":3},"
                + "{\"type\":\"video\"}"
                + "],\"metadata\":{},\"timestamp\":\"T\"}";
        JsonNode tree = TREES.readTree(json);
        dev.agentscopememory.grpc.v1.Msg wire = MsgConverter.toProto(tree);
        assertEquals(100, wire.getContent(0).getImage().getMinPixels());
        assertEquals(2000, wire.getContent(0).getImage().getMaxPixels());
        assertFalse(wire.getContent(1).getImage().hasMinPixels());
        assertEquals(2.5f, wire.getContent(2).getVideo().getFps());
        assertEquals(3, wire.getContent(2).getVideo().getTotalPixels());
        assertFalse(wire.getContent(3).getVideo().hasSource());
        // Text comparison: Java writes the Float fps exactly as the double it was read from.
        assertEquals(json, MsgConverter.write(MsgConverter.toJson(wire)));

        // Java reads snake_case too; the wire form is the same and Java writes camelCase back.
        JsonNode snake = TREES.readTree("{\"type\":\"video\",\"max_frames\":4,\"total_pixels\":9}");
        dev.agentscopememory.grpc.v1.Msg viaSnake = MsgConverter.toProto(
                TREES.readTree("{\"role\":\"USER\",\"content\":[" + snake + "]}"));
        assertEquals(4, viaSnake.getContent(0).getVideo().getMaxFrames());
        assertEquals(TREES.readTree("{\"type\":\"video\",\"maxFrames\":4,\"totalPixels\":9}"),
                MsgConverter.toJson(viaSnake).get("content").get(0));
    }

    @Test
    void badWireInputNamesTheField() {
        dev.agentscopememory.grpc.v1.Msg badMeta = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .setRole(Role.ROLE_USER).setMetadataJson("[1]").build();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> MsgConverter.fromProto(badMeta));
        assertTrue(e.getMessage().contains("metadata_json"), e.getMessage());

        dev.agentscopememory.grpc.v1.Msg badInput = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .setRole(Role.ROLE_ASSISTANT)
                .addContent(ContentBlock.newBuilder().setToolUse(
                        dev.agentscopememory.grpc.v1.ToolUseBlock.newBuilder().setInputJson("{not json")))
                .build();
        e = assertThrows(IllegalArgumentException.class, () -> MsgConverter.fromProto(badInput));
        assertTrue(e.getMessage().contains("content[0].input_json"), e.getMessage());

        dev.agentscopememory.grpc.v1.Msg emptyBlock = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .addContent(ContentBlock.getDefaultInstance()).build();
        e = assertThrows(IllegalArgumentException.class, () -> MsgConverter.fromProto(emptyBlock));
        assertTrue(e.getMessage().contains("content[0]"), e.getMessage());
    }

    /**
     * A role number a newer server has (9; this version's enum ends at ROLE_TOOL = 4) failed the
     * whole read ("role: unknown role number 9"); the message is now read as USER with the number
     * in its metadata, beside the messages around it.
     */
    @Test
    void aRoleOfANewerServerIsReadAsUserWithItsNumberInMetadata() throws Exception {
        dev.agentscopememory.grpc.v1.Msg newer = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .setId("新-9").setName("开发者").setRoleValue(9).addContent(text("请用中文回答"))
                .setMetadataJson("{\"来源\":\"新版\"}").build();
        dev.agentscopememory.grpc.v1.Msg tool = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .setId("旧-1").setRole(Role.ROLE_TOOL).addContent(text("found")).build();
        // As on a real call: the bytes of a newer server's answer, read by these stubs.
        newer = dev.agentscopememory.grpc.v1.Msg.parseFrom(newer.toByteArray());
        assertEquals(Role.UNRECOGNIZED, newer.getRole());
        List<Msg> read = MsgConverter.fromProto(List.of(tool, newer));
        assertEquals(io.agentscope.core.message.MsgRole.TOOL, read.get(0).getRole());
        Msg back = read.get(1);
        assertEquals(io.agentscope.core.message.MsgRole.USER, back.getRole());
        assertEquals("开发者", back.getName());
        assertEquals(TREES.readTree("{\"id\":\"新-9\",\"name\":\"开发者\",\"role\":\"USER\",\"content\":["
                        + "{\"type\":\"text\",\"text\":\"请用中文回答\"}],"
                        + "\"metadata\":{\"来源\":\"新版\",\"agentscope_memory_unknown_role\":9},\"timestamp\":null}"),
                jackson(back));
        assertEquals(9, ((Number) back.getMetadata().get(MsgConverter.UNKNOWN_ROLE_KEY)).intValue());
    }

    /**
     * A block of a oneof case a newer server has and this client's stubs do not (here field 12,
     * a message with one string): protobuf keeps it as an unknown field and the block arrives
     * with no kind set. The message is read without it, rather than the whole read failing.
     */
    static ContentBlock newerKindOfBlock() throws Exception {
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
        com.google.protobuf.CodedOutputStream out = com.google.protobuf.CodedOutputStream.newInstance(bytes);
        out.writeByteArray(12, dev.agentscopememory.grpc.v1.TextBlock.newBuilder().setText("a hologram").build().toByteArray());
        out.flush();
        ContentBlock block = ContentBlock.parseFrom(bytes.toByteArray());
        assertEquals(ContentBlock.BlockCase.BLOCK_NOT_SET, block.getBlockCase());
        return block;
    }

    static ContentBlock text(String text) {
        return ContentBlock.newBuilder().setText(dev.agentscopememory.grpc.v1.TextBlock.newBuilder().setText(text)).build();
    }

    @Test
    void aBlockOfANewerKindIsLeftOutNotFailingTheRead() throws Exception {
        dev.agentscopememory.grpc.v1.Msg wire = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .setId("新-1").setRole(Role.ROLE_ASSISTANT)
                .addContent(text("before"))
                .addContent(newerKindOfBlock())
                .addContent(ContentBlock.newBuilder().setToolResult(dev.agentscopememory.grpc.v1.ToolResultBlock
                        .newBuilder().setId("c1").setName("look")
                        .addOutput(newerKindOfBlock()).addOutput(text("seen"))))
                .addContent(text("after"))
                .setMetadataJson("{\"k\":1}")
                .build();
        // As on a real call: the bytes of a newer server's answer, read by these stubs.
        wire = dev.agentscopememory.grpc.v1.Msg.parseFrom(wire.toByteArray());
        Msg back = MsgConverter.fromProto(wire);
        assertEquals(TREES.readTree("{\"id\":\"新-1\",\"name\":null,\"role\":\"ASSISTANT\",\"content\":["
                        + "{\"type\":\"text\",\"text\":\"before\"},"
                        + "{\"type\":\"tool_result\",\"id\":\"c1\",\"name\":\"look\",\"output\":["
                        + "{\"type\":\"text\",\"text\":\"seen\"}],\"metadata\":{}},"
                        + "{\"type\":\"text\",\"text\":\"after\"}],"
                        + "\"metadata\":{\"k\":1},\"timestamp\":null}"),
                jackson(back));
        // A message made only of newer blocks is still a message (with no content), in its place.
        dev.agentscopememory.grpc.v1.Msg only = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .setId("新-2").setRole(Role.ROLE_USER).addContent(newerKindOfBlock()).build();
        List<Msg> list = MsgConverter.fromProto(List.of(wire, only));
        assertEquals(List.of("新-1", "新-2"), List.of(list.get(0).getId(), list.get(1).getId()));
        assertEquals(List.of(), list.get(1).getContent());

        // An image whose source is of a newer kind (Source field 9) cannot be an ImageBlock here either.
        java.io.ByteArrayOutputStream source = new java.io.ByteArrayOutputStream();
        com.google.protobuf.CodedOutputStream out = com.google.protobuf.CodedOutputStream.newInstance(source);
        out.writeString(9, "file-abc");
        out.flush();
        dev.agentscopememory.grpc.v1.Msg image = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .setId("新-3").setRole(Role.ROLE_USER).addContent(text("look"))
                .addContent(ContentBlock.newBuilder().setImage(dev.agentscopememory.grpc.v1.ImageBlock.newBuilder()
                        .setSource(dev.agentscopememory.grpc.v1.Source.parseFrom(source.toByteArray()))))
                .build();
        image = dev.agentscopememory.grpc.v1.Msg.parseFrom(image.toByteArray());
        assertEquals(TREES.readTree("[{\"type\":\"text\",\"text\":\"look\"}]"),
                jackson(MsgConverter.fromProto(image)).get("content"));
        // An empty source is not a newer one: it is refused, naming it.
        dev.agentscopememory.grpc.v1.Msg emptySource = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .setRole(Role.ROLE_USER).addContent(ContentBlock.newBuilder().setImage(
                        dev.agentscopememory.grpc.v1.ImageBlock.newBuilder()
                                .setSource(dev.agentscopememory.grpc.v1.Source.getDefaultInstance())))
                .build();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> MsgConverter.fromProto(emptySource));
        assertTrue(e.getMessage().contains("content[0].source"), e.getMessage());
    }

    @Test
    void unknownJavaBlockTypeIsRejected() throws Exception {
        JsonNode tree = TREES.readTree("{\"role\":\"USER\",\"content\":[{\"type\":\"hologram\"}]}");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> MsgConverter.toProto(tree));
        assertTrue(e.getMessage().contains("content[0].type"), e.getMessage());
        assertTrue(e.getMessage().contains("hologram"), e.getMessage());
    }

    @Test
    void emptyWireMapsMeanEmptyObjects() throws Exception {
        dev.agentscopememory.grpc.v1.Msg wire = dev.agentscopememory.grpc.v1.Msg.newBuilder()
                .setId("x").setRole(Role.ROLE_ASSISTANT)
                .addContent(ContentBlock.newBuilder().setToolUse(
                        dev.agentscopememory.grpc.v1.ToolUseBlock.newBuilder().setId("c").setName("n")))
                .build();
        Msg back = MsgConverter.fromProto(wire);
        assertEquals(TREES.readTree("{\"id\":\"x\",\"name\":null,\"role\":\"ASSISTANT\",\"content\":["
                        + "{\"type\":\"tool_use\",\"id\":\"c\",\"name\":\"n\",\"input\":{},\"content\":null,\"metadata\":{}}],"
                        + "\"metadata\":{},\"timestamp\":null}"),
                jackson(back));
        assertEquals(Map.of(), back.getMetadata());
    }
}
