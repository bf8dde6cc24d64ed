package dev.agentscopememory.agentscope2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.ListLongTermMemoriesRequest;
import dev.agentscopememory.grpc.v1.LongTermMemoryItem;
import dev.agentscopememory.grpc.v1.Scope;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.memory.LongTermMemoryMode;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.state.InMemoryAgentStateStore;
import io.agentscope.core.tool.Toolkit;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Long-term memory for a real AgentScope-Java 2.0.0 ReActAgent with a scripted model, on the real
 * server: {@link RemoteLongTermMemory} through the (deprecated, still working) builder modes.
 */
@SuppressWarnings("deprecation")
class LongTermMemoryAgentTest {

    private static final Duration WAIT = Duration.ofSeconds(180);

    private static TestServer server;
    private static RemoteConnection connection;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
        connection = RemoteConnection.builder().target(server.target()).deadline(Duration.ofSeconds(120)).build();
    }

    @AfterAll
    static void stop() {
        connection.close();
    }

    static ContentBlock text(String text) {
        return TextBlock.builder().text(text).build();
    }

    static ReActAgent.Builder agent(ScriptedModel model) {
        return ReActAgent.builder().name("Assistant").sysPrompt("你记得用户的事情。").model(model)
                .toolkit(weather()).maxIters(5).stateStore(new InMemoryAgentStateStore());
    }

    static Toolkit weather() {
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(new WeatherTools());
        return toolkit;
    }

    static RemoteLongTermMemory ltm(String userId) {
        return RemoteLongTermMemory.builder().connection(connection).agentName("Assistant").userId(userId).build();
    }

    /** The memory texts stored in a scope, as the server lists them. */
    static List<String> memories(String agentName, String userId) {
        Scope scope = Scope.newBuilder().setAgentName(agentName).setUserId(userId).build();
        return connection.longTermMemoryService()
                .listLongTermMemories(ListLongTermMemoriesRequest.newBuilder().setScope(scope).setPageSize(100).build())
                .getMemoriesList().stream().map(LongTermMemoryItem::getMemory).collect(Collectors.toList());
    }

    static boolean isInjection(Msg m) {
        return m.getRole() == MsgRole.USER && "long_term_memory".equals(m.getName())
                && m.getTextContent().contains("<long_term_memory>");
    }

    static String toolResultText(Msg toolMsg) {
        ToolResultBlock r = (ToolResultBlock) toolMsg.getContent().get(0);
        return ((TextBlock) r.getOutput().get(0)).getText();
    }

    // ------------------------------------------------------------ RemoteLongTermMemory on 2.x

    @Test
    void agentControlRecordsThenRetrievesInALaterCall() {
        String userId = "用户-" + UUID.randomUUID();
        try (RemoteLongTermMemory ltm = ltm(userId)) {
            ScriptedModel model = new ScriptedModel(List.of(
                    List.of(new ToolUseBlock("c1", "recordToMemory",
                            Map.of("thinking", "过敏很重要", "content", List.of("用户对花生过敏")),
                            "{\"thinking\":\"过敏很重要\",\"content\":[\"用户对花生过敏\"]}", Map.of())),
                    List.of(text("记住了。")),
                    List.of(new ToolUseBlock("c2", "retrieveFromMemory",
                            Map.of("keywords", List.of("花生", "过敏")), "{\"keywords\":[\"花生\",\"过敏\"]}", Map.of())),
                    List.of(text("你对花生过敏。"))));
            ReActAgent agent = agent(model).longTermMemory(ltm).longTermMemoryMode(LongTermMemoryMode.AGENT_CONTROL)
                    .build();
            agent.call(List.of(Scripts.user("请记住：我对花生过敏。"))).block(WAIT);
            Msg reply = agent.call(List.of(Scripts.user("我对什么过敏？"))).block(WAIT);

            assertEquals("你对花生过敏。", reply.getTextContent());
            // The model's 2nd call saw the record tool's result, its 4th the retrieve tool's.
            List<Msg> second = model.calls().get(1);
            assertEquals("\"Successfully recorded to long-term memory\"", toolResultText(second.get(second.size() - 1)));
            List<Msg> fourth = model.calls().get(3);
            String retrieved = toolResultText(fourth.get(fourth.size() - 1));
            assertTrue(retrieved.contains("<long_term_memory>") && retrieved.contains("用户对花生过敏"), retrieved);
            // No static injection in AGENT_CONTROL.
            assertFalse(model.calls().stream().flatMap(List::stream).anyMatch(LongTermMemoryAgentTest::isInjection));
            // The tool records the facts and the model's reasoning (as AgentScope's recordToMemory does).
            assertEquals(java.util.Set.of("用户对花生过敏", "过敏很重要"), java.util.Set.copyOf(memories("Assistant", userId)));
        }
    }

    @Test
    void staticAndBothWithTheDefaultSessionInjectAndRecord() {
        for (LongTermMemoryMode mode : List.of(LongTermMemoryMode.STATIC_CONTROL, LongTermMemoryMode.BOTH)) {
            String userId = "用户-" + UUID.randomUUID();
            try (RemoteLongTermMemory ltm = ltm(userId)) {
                ltm.record(List.of(Scripts.user("我最喜欢的城市是京都。"))).block(WAIT);
                ScriptedModel model = new ScriptedModel(List.of(List.of(text("你最喜欢京都。"))));
                ReActAgent agent = agent(model).longTermMemory(ltm).longTermMemoryMode(mode).build();
                agent.call(List.of(Scripts.user("我最喜欢哪个城市？"))).block(WAIT);

                // Retrieved before the call and given to the model after the user's message.
                List<Msg> seen = model.calls().get(0);
                Msg injected = seen.get(seen.size() - 1);
                assertTrue(isInjection(injected) && injected.getTextContent().contains("京都"), mode + ": " + seen);
                assertEquals("我最喜欢哪个城市？", seen.get(seen.size() - 2).getTextContent());
                // Recorded after the call (AgentScope's hook records the whole default-session context).
                List<String> stored = memories("Assistant", userId);
                assertTrue(stored.contains("我最喜欢哪个城市？") && stored.contains("你最喜欢京都。"), mode + ": " + stored);
            }
        }
    }

    @Test
    void builderChecksAsThe1xOneDoes() {
        IllegalArgumentException none = assertThrows(IllegalArgumentException.class,
                () -> RemoteLongTermMemory.builder().target("127.0.0.1:1").build());
        assertEquals("At least one of agentName, userId, or runName must be provided", none.getMessage());
        IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class,
                () -> RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("会".repeat(86)).build());
        assertEquals("scope.user_id: is 258 bytes of UTF-8; at most 256", tooLong.getMessage());
        IllegalArgumentException metadata = assertThrows(IllegalArgumentException.class,
                () -> RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("u")
                        .metadata(Map.of("来源", "半\uD83D")).build());
        assertTrue(metadata.getMessage().startsWith("metadata_json: contains a lone surrogate"), metadata.getMessage());
        // Nothing to send makes no call (nobody listens there).
        try (RemoteLongTermMemory unreachable = RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("u")
                .maxAttempts(1).build()) {
            assertEquals("", unreachable.retrieve(null).block());
            unreachable.record(List.of(Msg.builder().role(MsgRole.ASSISTANT).content(List.of()).build())).block();
            assertThrows(RemoteMemoryException.Unavailable.class,
                    () -> unreachable.retrieve(Scripts.user("什么")).block());
        }
    }
}
