package dev.agentscopememory.agentscope2;

import static dev.agentscopememory.agentscope2.LongTermAgents.counting;
import static dev.agentscopememory.agentscope2.LongTermAgents.count;
import static dev.agentscopememory.agentscope2.LongTermAgents.WAIT;
import static dev.agentscopememory.agentscope2.LongTermAgents.text;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.agentscopememory.agentscope2.RemoteLongTermMemoryMiddleware.Mode;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.ListLongTermMemoriesRequest;
import dev.agentscopememory.grpc.v1.LongTermMemoryItem;
import dev.agentscopememory.grpc.v1.RecordRequest;
import dev.agentscopememory.grpc.v1.Scope;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.RuntimeContext;
import io.agentscope.core.memory.LongTermMemoryMode;
import io.agentscope.core.memory.LongTermMemoryTools;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.model.ToolSchema;
import io.agentscope.core.tool.Toolkit;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link RemoteLongTermMemoryMiddleware}'s per-call {@code recordToMemory}/{@code
 * retrieveFromMemory} tools (AGENT_CONTROL, BOTH) on a real AgentScope-Java 2.0.0 ReActAgent with a
 * scripted model and the real server: each call's tools act in that call's user's scope, with
 * AgentScope's own schemas and result texts.
 */
@SuppressWarnings({"deprecation", "removal"})
class LongTermMemoryToolsAgentTest {

    private static TestServer server;
    private static RemoteConnection connection;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
        connection = LongTermAgents.connect(server.target());
    }

    @AfterAll
    static void stop() {
        connection.close();
    }

    static ToolUseBlock record(String id, String thinking, String fact) {
        return new ToolUseBlock(id, "recordToMemory", Map.of("thinking", thinking, "content", List.of(fact)),
                "{\"thinking\":\"" + thinking + "\",\"content\":[\"" + fact + "\"]}", Map.of());
    }

    static ToolUseBlock retrieve(String id, String... keywords) {
        String json = "{\"keywords\":[" + java.util.Arrays.stream(keywords).map(k -> "\"" + k + "\"")
                .collect(Collectors.joining(",")) + "]}";
        return new ToolUseBlock(id, "retrieveFromMemory", Map.of("keywords", List.of(keywords)), json, Map.of());
    }

    static ReActAgent agent(ScriptedModel model, RemoteLongTermMemoryMiddleware ltm) {
        return LongTermAgents.agent(model).middleware(ltm).build();
    }

    static Msg call(ReActAgent agent, String userId, String sessionId, String text) {
        return agent.call(List.of(Scripts.user(text)),
                RuntimeContext.builder().userId(userId).sessionId(sessionId).build()).block(WAIT);
    }

    static List<String> memories(String agentName, String userId) {
        return LongTermAgents.memories(connection, agentName, userId);
    }

    /** The text of the tool result the model was given last in its {@code step}-th call. */
    static String lastToolResult(ScriptedModel model, int step) {
        List<Msg> seen = model.calls().get(step);
        return LongTermMemoryAgentTest.toolResultText(seen.get(seen.size() - 1));
    }

    /** A tool schema as the model receives it, comparable with equals. */
    static JsonNode comparable(ToolSchema s) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", s.getName());
        m.put("description", s.getDescription());
        m.put("parameters", s.getParameters());
        m.put("outputSchema", s.getOutputSchema());
        m.put("strict", s.getStrict());
        return Scripts.TREES.valueToTree(m);
    }

    static Map<String, JsonNode> memorySchemas(List<ToolSchema> offered) {
        return offered.stream().filter(s -> s.getName().endsWith("Memory"))
                .collect(Collectors.toMap(ToolSchema::getName, LongTermMemoryToolsAgentTest::comparable));
    }

    /** The schemas of AgentScope's own LongTermMemoryTools, as its toolkit makes them. */
    static Map<String, JsonNode> agentScopeSchemas() {
        Toolkit toolkit = new Toolkit();
        try (RemoteLongTermMemory unused = RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("u").build()) {
            toolkit.registerTool(new LongTermMemoryTools(unused));
        }
        return memorySchemas(toolkit.getToolSchemas());
    }

    @Test
    void agentControlToolsActInEachCallsUserScope() {
        // With one RemoteLongTermMemory (its fixed scope) the deprecated builder's tools would put
        // both users' facts in one scope and give each the other's.
        String alice = "alice-" + UUID.randomUUID();
        String zhang = "张三-" + UUID.randomUUID();
        List<String> methods = new CopyOnWriteArrayList<>();
        List<RecordRequest> records = new CopyOnWriteArrayList<>();
        ManagedChannel channel = server.channel();
        try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder()
                .channel(ClientInterceptors.intercept(channel, counting(methods, records)))
                .mode(Mode.AGENT_CONTROL).build()) {
            ScriptedModel model = new ScriptedModel(List.of(
                    List.of(record("a1", "饮食禁忌很重要", "爱丽丝对花生过敏")),
                    List.of(text("记住了。")),
                    List.of(record("z1", "记下饮品喜好", "张三喜欢喝龙井茶")),
                    List.of(text("好的。")),
                    // Keywords that match both facts: only the caller's may come back.
                    List.of(retrieve("a2", "花生", "龙井茶")),
                    List.of(text("你对花生过敏。")),
                    List.of(retrieve("z2", "花生", "龙井茶")),
                    List.of(text("你喜欢龙井茶。"))));
            ReActAgent agent = agent(model, ltm);
            call(agent, alice, "alice-会话1", "请记住：我对花生过敏。");
            call(agent, zhang, "张三-会话1", "请记住：我喜欢喝龙井茶。");
            call(agent, alice, "alice-会话2", "我有什么忌口，喜欢喝什么？");
            Msg last = call(agent, zhang, "张三-会话2", "我有什么忌口，喜欢喝什么？");
            assertEquals("你喜欢龙井茶。", last.getTextContent());

            // AgentScope's result texts (the model sees the returned String as JSON).
            assertEquals("\"Successfully recorded to long-term memory\"", lastToolResult(model, 1));
            assertEquals("\"Successfully recorded to long-term memory\"", lastToolResult(model, 3));
            String aliceFound = lastToolResult(model, 5);
            assertTrue(aliceFound.contains("<long_term_memory>") && aliceFound.contains("爱丽丝对花生过敏"), aliceFound);
            assertFalse(aliceFound.contains("龙井"), aliceFound);
            String zhangFound = lastToolResult(model, 7);
            assertTrue(zhangFound.contains("<long_term_memory>") && zhangFound.contains("张三喜欢喝龙井茶"), zhangFound);
            assertFalse(zhangFound.contains("花生"), zhangFound);

            // Stored in each caller's scope (facts and reasoning, as AgentScope's tool records).
            assertEquals(Set.of("爱丽丝对花生过敏", "饮食禁忌很重要"), Set.copyOf(memories("Assistant", alice)));
            assertEquals(Set.of("张三喜欢喝龙井茶", "记下饮品喜好"), Set.copyOf(memories("Assistant", zhang)));

            // The model is offered AgentScope's own tool schemas, on every step.
            Map<String, JsonNode> expected = agentScopeSchemas();
            assertEquals(Set.of("recordToMemory", "retrieveFromMemory"), expected.keySet());
            for (List<ToolSchema> offered : model.tools()) {
                assertEquals(expected, memorySchemas(offered));
            }

            // AGENT_CONTROL: only the tools' calls, no static retrieve or record, no injection.
            assertEquals(2, count(methods, "Record"), methods.toString());
            assertEquals(2, count(methods, "Retrieve"), methods.toString());
            assertFalse(model.calls().stream().flatMap(List::stream).anyMatch(LongTermMemoryAgentTest::isInjection));
            assertEquals(List.of(alice, zhang), records.stream().map(r -> r.getScope().getUserId()).toList());
            assertEquals("Assistant", records.get(0).getScope().getAgentName());
        } finally {
            channel.shutdownNow();
        }
    }

    @Test
    void bothInjectsAndRecordsAroundTheCallAndOffersTheTools() {
        String zhang = "张三-" + UUID.randomUUID();
        List<String> methods = new CopyOnWriteArrayList<>();
        List<RecordRequest> records = new CopyOnWriteArrayList<>();
        ManagedChannel channel = server.channel();
        try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder()
                .channel(ClientInterceptors.intercept(channel, counting(methods, records)))
                .mode(Mode.BOTH).build()) {
            ScriptedModel model = new ScriptedModel(List.of(
                    List.of(record("b1", "宠物信息", "张三的猫叫咪咪")),
                    List.of(text("记住了，你的猫叫咪咪。")),
                    List.of(retrieve("b2", "猫")),
                    List.of(text("你的猫叫咪咪。"))));
            ReActAgent agent = agent(model, ltm);
            call(agent, zhang, "会话-1", "我的猫叫咪咪。");
            call(agent, zhang, "会话-2", "我的猫叫什么？");

            // Static: the 2nd call's input got the memories, after the user's message.
            List<Msg> second = model.calls().get(2);
            Msg injected = second.get(second.size() - 1);
            assertTrue(LongTermMemoryAgentTest.isInjection(injected) && injected.getTextContent().contains("咪咪"),
                    second.toString());
            assertEquals("我的猫叫什么？", second.get(second.size() - 2).getTextContent());
            // Tools: offered, and the retrieve tool found the fact the record tool stored.
            assertEquals(agentScopeSchemas(), memorySchemas(model.tools().get(0)));
            assertTrue(lastToolResult(model, 3).contains("张三的猫叫咪咪"), lastToolResult(model, 3));
            // One Retrieve before each call plus the tool's; one Record after each call plus the tool's.
            assertEquals(3, count(methods, "Retrieve"), methods.toString());
            assertEquals(3, count(methods, "Record"), methods.toString());
            assertTrue(memories("Assistant", zhang).containsAll(
                    List.of("张三的猫叫咪咪", "我的猫叫咪咪。", "我的猫叫什么？")));
        } finally {
            channel.shutdownNow();
        }
    }

    @Test
    void theToolsScopeIsTheMiddlewaresWithAGivenAgentNameAndTheSessionAsRunName() {
        String zhang = "张三-" + UUID.randomUUID();
        List<String> methods = new CopyOnWriteArrayList<>();
        List<RecordRequest> records = new CopyOnWriteArrayList<>();
        ManagedChannel channel = server.channel();
        try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder()
                .channel(ClientInterceptors.intercept(channel, counting(methods, records)))
                .agentName("助手").sessionAsRunName(true).mode(Mode.AGENT_CONTROL).build()) {
            ScriptedModel model = new ScriptedModel(List.of(
                    List.of(record("r1", "记下", "张三住在成都")),
                    List.of(text("好。")),
                    List.of(retrieve("r2", "成都")),
                    List.of(text("不知道。"))));
            ReActAgent agent = agent(model, ltm);
            call(agent, zhang, "会话-1", "我住在成都。");
            call(agent, zhang, "会话-2", "我住在哪里？");
            Scope first = records.get(0).getScope();
            assertEquals(List.of("助手", zhang, "会话-1"), List.of(first.getAgentName(), first.getUserId(), first.getRunName()));
            // Another session is another run: the retrieve tool finds nothing of the first.
            assertEquals("\"No relevant memories found\"", lastToolResult(model, 3));
        } finally {
            channel.shutdownNow();
        }
    }

    /**
     * The deprecated builder's long-term memory in AGENT_CONTROL or BOTH beside the middleware in
     * AGENT_CONTROL or BOTH: 2.0.0 registers AgentScope's LongTermMemoryTools after the middlewares,
     * silently replacing the middleware's tools of the same names, so the model's recordToMemory
     * went to the builder memory's one fixed scope (a 2.0.0 agent stored "张三住在成都" under the
     * fixed user and nothing under the caller). Now every call fails before anything runs, saying
     * to use one or the other.
     */
    @Test
    void theDeprecatedBuildersToolsBesideTheMiddlewaresFailTheCallNotTheScope() {
        String fixedUser = "固定用户-" + UUID.randomUUID();
        String caller = "张三-" + UUID.randomUUID();
        for (Mode mode : List.of(Mode.AGENT_CONTROL, Mode.BOTH)) {
            List<String> methods = new CopyOnWriteArrayList<>();
            List<RecordRequest> records = new CopyOnWriteArrayList<>();
            ManagedChannel channel = server.channel();
            try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder()
                    .channel(ClientInterceptors.intercept(channel, counting(methods, records))).mode(mode).build();
                    RemoteLongTermMemory fixed = RemoteLongTermMemory.builder().connection(connection)
                            .agentName("Assistant").userId(fixedUser).build()) {
                ScriptedModel model = new ScriptedModel(List.of(
                        List.of(record("c1", "记下住址", "张三住在成都")),
                        List.of(text("记住了。"))));
                ReActAgent agent = LongTermAgents.agent(model).middleware(ltm).longTermMemory(fixed)
                        .longTermMemoryMode(mode == Mode.BOTH ? LongTermMemoryMode.BOTH : LongTermMemoryMode.AGENT_CONTROL)
                        .build();
                for (String session : List.of("会话-1", "会话-2")) {
                    IllegalStateException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
                            () -> call(agent, caller, session, "请记住：我住在成都。"));
                    assertTrue(e.getMessage().contains("recordToMemory") && e.getMessage().contains("longTermMemory(...)"),
                            e.getMessage());
                    // Mode.STATIC_CONTROL is offered only when the builder added no static hook
                    // (its BOTH does): beside that hook it would retrieve and record twice.
                    assertEquals(mode == Mode.AGENT_CONTROL, e.getMessage().contains("Mode.STATIC_CONTROL"), e.getMessage());
                }
                // Nothing ran: no model call, no static retrieve or record, nothing stored anywhere.
                assertEquals(0, model.used(), mode.toString());
                assertEquals(List.of(), methods, mode.toString());
                assertEquals(List.of(), memories("Assistant", caller), mode.toString());
                assertEquals(List.of(), memories("Assistant", fixedUser), mode.toString());
            } finally {
                channel.shutdownNow();
            }
        }
    }

    /**
     * The deprecated {@code longTermMemory(...)} in STATIC_CONTROL or BOTH (AgentScope's default)
     * adds its StaticLongTermMemoryHook; beside the middleware in STATIC_CONTROL (or BOTH with the
     * builder in STATIC_CONTROL) every call ran without a word and retrieved and recorded twice, the
     * hook's in the builder memory's fixed scope from the default session. 2.0.0's build() adds that hook after it
     * hands the middlewares the toolkit, so the first call is where it can be seen: now every call
     * fails before anything runs, saying to keep the middleware.
     */
    @Test
    void theDeprecatedBuildersStaticHookBesideTheMiddlewareFailsTheCallNotRecordingTwice() {
        String fixedUser = "固定用户-" + UUID.randomUUID();
        String caller = "张三-" + UUID.randomUUID();
        record Pair(Mode middleware, LongTermMemoryMode builder) {}
        for (Pair pair : List.of(new Pair(Mode.STATIC_CONTROL, LongTermMemoryMode.STATIC_CONTROL),
                new Pair(Mode.STATIC_CONTROL, LongTermMemoryMode.BOTH),
                new Pair(Mode.BOTH, LongTermMemoryMode.STATIC_CONTROL))) {
            List<String> methods = new CopyOnWriteArrayList<>();
            List<String> fixedMethods = new CopyOnWriteArrayList<>();
            ManagedChannel channel = server.channel();
            ManagedChannel fixedChannel = server.channel();
            try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder()
                    .channel(ClientInterceptors.intercept(channel, counting(methods, new CopyOnWriteArrayList<>())))
                    .mode(pair.middleware()).build();
                    RemoteLongTermMemory fixed = RemoteLongTermMemory.builder()
                            .channel(ClientInterceptors.intercept(fixedChannel,
                                    counting(fixedMethods, new CopyOnWriteArrayList<>())))
                            .agentName("Assistant").userId(fixedUser).build()) {
                ScriptedModel model = new ScriptedModel(List.of(List.of(text("记住了，你住在成都。"))));
                ReActAgent agent = LongTermAgents.agent(model).middleware(ltm).longTermMemory(fixed)
                        .longTermMemoryMode(pair.builder()).build();
                for (String session : List.of("会话-1", "会话-2")) {
                    IllegalStateException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
                            () -> call(agent, caller, session, "请记住：我住在成都。"), pair.toString());
                    assertTrue(e.getMessage().contains("StaticLongTermMemoryHook")
                            && e.getMessage().contains("in " + pair.middleware() + ":")
                            && e.getMessage().contains("Keep the middleware: drop longTermMemory(...)"), e.getMessage());
                }
                // Nothing ran: no model call, no retrieve or record by either, nothing stored anywhere.
                assertEquals(0, model.used(), pair.toString());
                assertEquals(List.of(), methods, pair.toString());
                assertEquals(List.of(), fixedMethods, pair.toString());
                assertEquals(List.of(), memories("Assistant", caller), pair.toString());
                assertEquals(List.of(), memories("Assistant", fixedUser), pair.toString());
            } finally {
                channel.shutdownNow();
                fixedChannel.shutdownNow();
            }
        }
        // The builder's memory for its tools only (AGENT_CONTROL) beside the static middleware adds
        // no hook: the call runs, and the middleware records it in the caller's scope alone.
        try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder().connection(connection)
                .build();
                RemoteLongTermMemory fixed = RemoteLongTermMemory.builder().connection(connection)
                        .agentName("Assistant").userId(fixedUser).build()) {
            ScriptedModel model = new ScriptedModel(List.of(List.of(text("记住了，你住在成都。"))));
            ReActAgent agent = LongTermAgents.agent(model).middleware(ltm).longTermMemory(fixed)
                    .longTermMemoryMode(LongTermMemoryMode.AGENT_CONTROL).build();
            call(agent, caller, "会话-3", "请记住：我住在成都。");
            assertEquals(Set.of("请记住：我住在成都。", "记住了，你住在成都。"), Set.copyOf(memories("Assistant", caller)));
            assertEquals(List.of(), memories("Assistant", fixedUser));
        }
    }

    /**
     * Tools of these names already on the toolkit given to the agent (AgentScope's, or another
     * middleware's): the middleware used to replace them silently; now the agent's build() fails.
     */
    @Test
    void toolsOfTheSameNamesAlreadyOnTheToolkitFailTheAgentsBuild() {
        try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder().connection(connection)
                .mode(Mode.AGENT_CONTROL).build();
                RemoteLongTermMemoryMiddleware other = RemoteLongTermMemoryMiddleware.builder().connection(connection)
                        .mode(Mode.BOTH).build();
                RemoteLongTermMemory fixed = RemoteLongTermMemory.builder().connection(connection)
                        .agentName("Assistant").userId("固定用户").build()) {
            Toolkit toolkit = new Toolkit();
            toolkit.registerTool(new LongTermMemoryTools(fixed));
            ScriptedModel model = new ScriptedModel(List.of(List.of(text("好。"))));
            IllegalStateException given = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
                    () -> ReActAgent.builder().name("Assistant").model(model).toolkit(toolkit).middleware(ltm).build());
            assertTrue(given.getMessage().contains("[recordToMemory, retrieveFromMemory]")
                    && given.getMessage().contains("LongTermMemoryTools"), given.getMessage());
            IllegalStateException twice = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class,
                    () -> LongTermAgents.agent(model).middleware(ltm).middleware(other).build());
            assertTrue(twice.getMessage().startsWith("RemoteLongTermMemoryMiddleware in BOTH"), twice.getMessage());
            // Each middleware alone still builds and offers its tools.
            assertTrue(agent(model, other).getToolkit().getToolNames().contains("retrieveFromMemory"));
        }
    }

    @Test
    void staticControlStaysTheDefaultAndOffersNoTools() {
        try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder().connection(connection)
                .build()) {
            ScriptedModel model = new ScriptedModel(List.of(List.of(text("好。"))));
            call(agent(model, ltm), "alice-" + UUID.randomUUID(), "s-1", "你好");
            assertEquals(Map.of(), memorySchemas(model.tools().get(0)));
            // The weather tools are still there: the toolkit is the agent's own.
            assertTrue(model.tools().get(0).stream().anyMatch(s -> s.getName().equals("get_weather")));
        }
    }

    @Test
    void aServerThatIsDownIsTheToolsResultTextNotTheCallsFailure() {
        // failOnError concerns the static part; AgentScope's tools never fail the call.
        try (RemoteLongTermMemoryMiddleware down = RemoteLongTermMemoryMiddleware.builder().target("127.0.0.1:1")
                .maxAttempts(1).deadline(Duration.ofSeconds(5)).failOnError(true).mode(Mode.AGENT_CONTROL).build();
                RemoteLongTermMemory fixed = RemoteLongTermMemory.builder().target("127.0.0.1:1").maxAttempts(1)
                        .deadline(Duration.ofSeconds(5)).agentName("Assistant").userId("alice").build()) {
            ScriptedModel model = new ScriptedModel(List.of(
                    List.of(record("d1", "记下", "爱丽丝住在杭州")),
                    List.of(retrieve("d2", "杭州")),
                    List.of(text("抱歉，我现在记不住。")),
                    // A user id the server would refuse: the tool says why, the call goes on.
                    List.of(record("d3", "记下", "住在杭州")),
                    List.of(text("抱歉。"))));
            ReActAgent agent = agent(model, down);
            Msg reply = call(agent, "alice", "s-1", "我住在杭州，记住。");
            assertEquals("抱歉，我现在记不住。", reply.getTextContent());
            // AgentScope's own texts: what its LongTermMemoryTools says for the same failure.
            LongTermMemoryTools upstream = new LongTermMemoryTools(fixed);
            String recordError = upstream.recordToMemory("记下", List.of("爱丽丝住在杭州")).block(WAIT);
            String retrieveError = upstream.retrieveFromMemory(List.of("杭州")).block(WAIT);
            assertTrue(recordError.startsWith("Error recording memory: "), recordError);
            assertTrue(retrieveError.startsWith("Error retrieving memory: "), retrieveError);
            assertEquals(Scripts.TREES.valueToTree(recordError).toString(), lastToolResult(model, 1));
            assertEquals(Scripts.TREES.valueToTree(retrieveError).toString(), lastToolResult(model, 2));

            Msg blank = call(agent, "   ", "s-2", "我住在杭州。");
            assertEquals("抱歉。", blank.getTextContent());
            assertEquals("\"Error recording memory: scope.user_id: must not be blank\"", lastToolResult(model, 4));
        }
    }
}
