package dev.agentscopememory.agentscope2;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.RuntimeContext;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.state.AgentStateStore;
import io.agentscope.core.tool.Toolkit;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/** Scripted tool-using turns for a 2.0 ReActAgent, and JSON comparison helpers. */
final class Scripts {

    static final ObjectMapper TREES = new ObjectMapper();

    private Scripts() {}

    /** Turn 1: a tool call, then two parallel calls, then the answer. Turn 2: a call and the answer. */
    static List<List<ContentBlock>> weatherTurns() {
        return List.of(
                List.of(TextBlock.builder().text("Let me check Paris.").build(),
                        new ToolUseBlock("call_1", "get_weather", Map.of("city", "Paris"), "{\"city\":\"Paris\"}", Map.of())),
                List.of(TextBlock.builder().text("现在查北京, and a sum.").build(),
                        new ToolUseBlock("call_2", "get_weather", Map.of("city", "北京"), "{\"city\":\"北京\"}", Map.of()),
                        new ToolUseBlock("call_3", "add", Map.of("a", 19, "b", 23), "{\"a\":19,\"b\":23}", Map.of())),
                List.of(TextBlock.builder().text("Paris 21C, 北京 25C; 19+23=42.").build()),
                List.of(new ToolUseBlock("call_4", "get_weather", Map.of("city", "Rome"), "{\"city\":\"Rome\"}", Map.of())),
                List.of(TextBlock.builder().text("I do not know Rome's weather.").build()));
    }

    /** A one-step answer per call, for concurrency tests. */
    static List<List<ContentBlock>> answers(String who, int count) {
        return java.util.stream.IntStream.range(0, count)
                .mapToObj(i -> List.<ContentBlock>of(TextBlock.builder().text(who + " answer " + i).build()))
                .toList();
    }

    static ReActAgent agent(ScriptedModel model, AgentStateStore store) {
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(new WeatherTools());
        return ReActAgent.builder().name("Assistant").sysPrompt("You are a weather assistant.")
                .model(model).toolkit(toolkit).maxIters(6).stateStore(store).build();
    }

    static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    static Msg call(ReActAgent agent, String userId, String sessionId, String text) {
        return agent.call(List.of(user(text)), RuntimeContext.builder().userId(userId).sessionId(sessionId).build())
                .block(Duration.ofSeconds(60));
    }

    /** An AgentState's JSON without what differs between runs: ids, times, reply id, usage times. */
    static JsonNode comparable(String agentStateJson) throws Exception {
        ObjectNode state = (ObjectNode) TREES.readTree(agentStateJson);
        state.remove("reply_id");
        state.remove("session_id");
        ArrayNode context = (ArrayNode) state.get("context");
        for (JsonNode m : context) {
            ObjectNode node = (ObjectNode) m;
            node.remove("id");
            node.remove("timestamp");
            if (node.get("metadata") instanceof ObjectNode meta && meta.get("_chat_usage") instanceof ObjectNode usage) {
                usage.remove("time");
            }
            if (node.get("usage") instanceof ObjectNode usage) {
                usage.remove("time");
            }
        }
        return state;
    }
}
