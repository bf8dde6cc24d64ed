package dev.agentscopememory.client.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.client.internal.WireJson.Dialect;
import dev.agentscopememory.grpc.v1.ContentBlock;
import dev.agentscopememory.grpc.v1.ContentBlock.BlockCase;
import dev.agentscopememory.grpc.v1.Msg;
import dev.agentscopememory.grpc.v1.Role;
import dev.agentscopememory.grpc.v1.TextBlock;
import dev.agentscopememory.grpc.v1.ToolResultBlock;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The mapping both adapters share, on AgentScope's JSON shape with no AgentScope on the classpath:
 * the two dialects differ only in the 2.x block kinds the wire has no block for.
 */
class WireJsonTest {

    private static final ObjectMapper TREES = new ObjectMapper();

    private static JsonNode tree(String json) throws Exception {
        return TREES.readTree(json);
    }

    private static final String HINT = "{\"type\":\"hint\",\"id\":\"h1\",\"hint\":\"用户喜欢冷笑话。\",\"source\":\"爱丽丝\"}";
    private static final String DATA =
            "{\"type\":\"data\",\"source\":{\"type\":\"base64\",\"media_type\":\"text/plain\",\"data\":\"5L2g5aW9\"}}";

    @Test
    void agentScope2SendsAHintAsItsTextAndLeavesDataOut() throws Exception {
        JsonNode json = tree("{\"id\":\"m1\",\"name\":\"团队\",\"role\":\"ASSISTANT\",\"content\":["
                + "{\"type\":\"text\",\"text\":\"你好\"}," + HINT + "," + DATA + ","
                + "{\"type\":\"tool_result\",\"id\":\"c1\",\"name\":\"读\",\"output\":["
                + "{\"type\":\"text\",\"text\":\"内容\"}," + DATA + "],\"metadata\":{}}],"
                + "\"metadata\":{},\"timestamp\":null}");
        Msg wire = WireJson.toProto(json, Dialect.AGENTSCOPE_2);
        assertEquals(Role.ROLE_ASSISTANT, wire.getRole());
        assertEquals(List.of(BlockCase.TEXT, BlockCase.TEXT, BlockCase.TOOL_RESULT),
                wire.getContentList().stream().map(ContentBlock::getBlockCase).toList());
        assertEquals("用户喜欢冷笑话。", wire.getContent(1).getText().getText());
        ToolResultBlock result = wire.getContent(2).getToolResult();
        assertEquals(1, result.getOutputCount());
        assertEquals("内容", result.getOutput(0).getText().getText());
    }

    @Test
    void agentScope1RefusesHintAndDataBlocksAsUnknownTypes() throws Exception {
        JsonNode hinted = tree("{\"role\":\"USER\",\"content\":[{\"type\":\"text\",\"text\":\"你好\"}," + HINT + "]}");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> WireJson.toProto(hinted, Dialect.AGENTSCOPE_1));
        assertEquals("content[1].type: unknown block type 'hint'", e.getMessage());

        JsonNode withData = tree("{\"role\":\"TOOL\",\"content\":[{\"type\":\"tool_result\",\"output\":[" + DATA + "]}]}");
        e = assertThrows(IllegalArgumentException.class, () -> WireJson.toProto(withData, Dialect.AGENTSCOPE_1));
        assertEquals("content[0].output[0].type: unknown block type 'data'", e.getMessage());
    }

    @Test
    void aBlockLeftOutKeepsTheIndicesErrorsNameAndIsStillChecked() throws Exception {
        // The position in an error is the one in the agent's message, data blocks counted.
        JsonNode afterData = tree("{\"role\":\"USER\",\"content\":[" + DATA + ",{\"type\":\"全息\"}]}");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> WireJson.toProto(afterData, Dialect.AGENTSCOPE_2));
        assertEquals("content[1].type: unknown block type '全息'", e.getMessage());

        // Half a surrogate pair is refused anywhere in the message, even in a block left out.
        JsonNode brokenData = tree("{\"role\":\"USER\",\"content\":[{\"type\":\"data\",\"name\":\"表情\\ud83d\"}]}");
        e = assertThrows(IllegalArgumentException.class, () -> WireJson.toProto(brokenData, Dialect.AGENTSCOPE_2));
        assertEquals("content[0].name: contains a lone surrogate at character 2; it is not Unicode text and "
                + "cannot be stored", e.getMessage());
    }

    @Test
    void aWireMessageGoesToAgentScopeJsonAndBackUnchangedInBothDialects() throws Exception {
        Msg wire = Msg.newBuilder().setId("m2").setName("助手").setRole(Role.ROLE_TOOL)
                .addContent(ContentBlock.newBuilder().setText(TextBlock.newBuilder().setText("晴，25度")))
                .addContent(ContentBlock.newBuilder().setToolResult(ToolResultBlock.newBuilder().setId("c1")
                        .setName("查询").addOutput(ContentBlock.newBuilder()
                                .setText(TextBlock.newBuilder().setText("北京")))
                        .setMetadataJson("{\"次数\":3}")))
                .setMetadataJson("{\"嵌套\":{\"列表\":[1,\"二\",null]}}")
                .setTimestamp("2026-11-27 10:00:00.000")
                .build();
        JsonNode json = WireJson.toJson(wire);
        assertEquals(tree("{\"id\":\"m2\",\"name\":\"助手\",\"role\":\"TOOL\",\"content\":["
                        + "{\"type\":\"text\",\"text\":\"晴，25度\"},"
                        + "{\"type\":\"tool_result\",\"id\":\"c1\",\"name\":\"查询\","
                        + "\"output\":[{\"type\":\"text\",\"text\":\"北京\"}],\"metadata\":{\"次数\":3}}],"
                        + "\"metadata\":{\"嵌套\":{\"列表\":[1,\"二\",null]}},\"timestamp\":\"2026-11-27 10:00:00.000\"}"),
                json);
        for (Dialect dialect : Dialect.values()) {
            assertEquals(wire, WireJson.toProto(json, dialect), dialect.name());
        }
    }
}
