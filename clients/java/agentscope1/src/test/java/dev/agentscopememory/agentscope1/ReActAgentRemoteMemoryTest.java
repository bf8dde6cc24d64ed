package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.memory.Memory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.tool.Toolkit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** A real ReActAgent runs tool-using turns on the remote memory and on InMemoryMemory. */
class ReActAgentRemoteMemoryTest {

    private static TestServer server;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
    }

    record Run(List<Msg> memory, List<Msg> replies, ScriptedModel model) {}

    static Run run(Memory memory) {
        ScriptedModel model = new ScriptedModel(AgentScripts.weatherTurns());
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(new WeatherTools());
        ReActAgent agent = ReActAgent.builder()
                .name("Assistant")
                .sysPrompt("You are a weather assistant.")
                .model(model)
                .toolkit(toolkit)
                .memory(memory)
                .maxIters(6)
                .build();
        List<Msg> replies = new ArrayList<>();
        replies.add(agent.call(Msg.builder().role(MsgRole.USER).name("user")
                .textContent("Weather in Paris and Berlin? Also 19+23.").build()).block(Duration.ofSeconds(60)));
        replies.add(agent.call(Msg.builder().role(MsgRole.USER).name("user")
                .textContent("And Rome?").build()).block(Duration.ofSeconds(60)));
        return new Run(memory.getMessages(), replies, model);
    }

    static String resultText(Msg toolMsg) {
        ToolResultBlock r = (ToolResultBlock) toolMsg.getContent().get(0);
        return ((io.agentscope.core.message.TextBlock) r.getOutput().get(0)).getText();
    }

    @Test
    void remoteMemoryEqualsInMemoryMemoryAfterToolTurns() throws Exception {
        Run local = run(new InMemoryMemory());
        try (RemoteMemory remoteMemory = RemoteMemory.builder().target(server.target())
                .memoryId("agent-" + UUID.randomUUID()).build()) {
            Run remote = run(remoteMemory);

            // The whole script ran in both: 3 reasoning steps + 2 in the second turn.
            assertEquals(5, local.model().used());
            assertEquals(5, remote.model().used());

            // user, reasoning(tool), tool result, reasoning(2 tools), 2 tool results, answer,
            // user, reasoning(tool), tool result, answer
            assertEquals(11, local.memory().size());
            JsonNode expected = AgentScripts.comparable(local.memory());
            if (Boolean.getBoolean("dump")) System.out.println("DUMP " + expected.toPrettyString());
            assertEquals(expected, AgentScripts.comparable(remote.memory()));

            // The model saw the same context at every step, read back from the server.
            assertEquals(local.model().calls().size(), remote.model().calls().size());
            for (int i = 0; i < local.model().calls().size(); i++) {
                assertEquals(AgentScripts.comparable(local.model().calls().get(i)),
                        AgentScripts.comparable(remote.model().calls().get(i)), "model call " + i);
            }
            assertEquals(AgentScripts.comparable(local.replies()), AgentScripts.comparable(remote.replies()));

            // Spot checks on what ReActAgent stored.
            Msg toolResult = remote.memory().get(2);
            assertEquals(MsgRole.TOOL, toolResult.getRole());
            ToolResultBlock block = (ToolResultBlock) toolResult.getContent().get(0);
            assertEquals("call_1", block.getId());
            assertEquals("\"Sunny, 21C\"", ((io.agentscope.core.message.TextBlock) block.getOutput().get(0)).getText());
            assertEquals(List.of("\"Rain, 14C\"", "42", "\"Unknown city Rome\""), List.of(
                    resultText(remote.memory().get(4)), resultText(remote.memory().get(5)), resultText(remote.memory().get(9))));
            assertTrue(remote.memory().get(6).getTextContent().contains("42"));

            // A second client sees the same stored history (it is really on the server).
            try (RemoteMemory other = RemoteMemory.builder().target(server.target())
                    .memoryId(remoteMemory.getMemoryId()).createIfMissing(false).build()) {
                assertEquals(expected, AgentScripts.comparable(other.getMessages()));
            }
        }
    }
}
