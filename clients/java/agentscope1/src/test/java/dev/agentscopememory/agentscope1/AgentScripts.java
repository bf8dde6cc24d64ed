package dev.agentscopememory.agentscope1;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ThinkingBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.util.JsonUtils;
import java.util.List;
import java.util.Map;

/** Scripts for a multi-step tool-using ReAct turn, and comparison helpers. */
final class AgentScripts {

    private static final ObjectMapper TREES = new ObjectMapper();

    private AgentScripts() {}

    /** Turn 1: a tool call, then two parallel tool calls, then the answer. Turn 2: one more call. */
    static List<List<ContentBlock>> weatherTurns() {
        return List.of(
                List.of(ThinkingBlock.builder().thinking("Need the weather in Paris").build(),
                        TextBlock.builder().text("Let me check Paris.").build(),
                        new ToolUseBlock("call_1", "get_weather", Map.of("city", "Paris"), "{\"city\":\"Paris\"}", Map.of())),
                List.of(TextBlock.builder().text("Now Berlin, and a sum.").build(),
                        new ToolUseBlock("call_2", "get_weather", Map.of("city", "Berlin"), "{\"city\":\"Berlin\"}", Map.of()),
                        new ToolUseBlock("call_3", "add", Map.of("a", 19, "b", 23), "{\"a\":19,\"b\":23}", Map.of())),
                List.of(TextBlock.builder().text("Paris is sunny (21C), Berlin rainy (14C); 19+23=42.").build()),
                // second turn
                List.of(new ToolUseBlock("call_4", "get_weather", Map.of("city", "Rome"), "{\"city\":\"Rome\"}", Map.of())),
                List.of(TextBlock.builder().text("I do not know Rome's weather.").build()));
    }

    /** AgentScope's JSON of messages with generated ids and timestamps removed. */
    static JsonNode comparable(List<Msg> messages) throws Exception {
        ArrayNode out = TREES.createArrayNode();
        for (Msg m : messages) {
            ObjectNode node = (ObjectNode) TREES.readTree(JsonUtils.getJsonCodec().toJson(m));
            node.remove("id");
            node.remove("timestamp");
            ObjectNode meta = (ObjectNode) node.get("metadata");
            if (meta != null && meta.has("_chat_usage")) {
                // the measured time of a model call differs between runs
                ((ObjectNode) meta.get("_chat_usage")).remove("time");
            }
            out.add(node);
        }
        return out;
    }
}
