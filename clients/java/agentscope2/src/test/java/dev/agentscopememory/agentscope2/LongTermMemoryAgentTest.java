package dev.agentscopememory.agentscope2;

import static dev.agentscopememory.agentscope2.LongTermAgents.counting;
import static dev.agentscopememory.agentscope2.LongTermAgents.WAIT;
import static dev.agentscopememory.agentscope2.LongTermAgents.agent;
import static dev.agentscopememory.agentscope2.LongTermAgents.text;
import static dev.agentscopememory.agentscope2.LongTermAgents.texts;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.ListLongTermMemoriesRequest;
import dev.agentscopememory.grpc.v1.LongTermMemoryItem;
import dev.agentscopememory.grpc.v1.RecordRequest;
import dev.agentscopememory.grpc.v1.Scope;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.RuntimeContext;
import io.agentscope.core.memory.LongTermMemoryMode;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Long-term memory for a real AgentScope-Java 2.0.0 ReActAgent with a scripted model, on the real
 * server: {@link RemoteLongTermMemory} through the (deprecated, still working) builder modes, and
 * {@link RemoteLongTermMemoryMiddleware} for per-call users and sessions.
 */
@SuppressWarnings("deprecation")
class LongTermMemoryAgentTest {

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

    static RemoteLongTermMemory ltm(String userId) {
        return RemoteLongTermMemory.builder().connection(connection).agentName("Assistant").userId(userId).build();
    }

    static List<String> memories(String agentName, String userId) {
        return LongTermAgents.memories(connection, agentName, userId);
    }

    static boolean isInjection(Msg m) {
        return m.getRole() == MsgRole.USER && "long_term_memory".equals(m.getName())
                && m.getTextContent().contains("<long_term_memory>");
    }

    static String toolResultText(Msg toolMsg) {
        ToolResultBlock r = (ToolResultBlock) toolMsg.getContent().get(0);
        return ((TextBlock) r.getOutput().get(0)).getText();
    }

    static Msg call(ReActAgent agent, RuntimeContext ctx, String text) {
        return agent.call(List.of(Scripts.user(text)), ctx).block(WAIT);
    }

    static RuntimeContext ctx(String userId, String sessionId) {
        return RuntimeContext.builder().userId(userId).sessionId(sessionId).build();
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
            // A message without text is left out before anything else of it is read: its broken
            // name does not fail the record of the rest.
            unreachable.record(List.of(Msg.builder().role(MsgRole.ASSISTANT).name("半\uD83D")
                    .content(List.of(TextBlock.builder().text(" \n").build())).build())).block();
            assertThrows(RemoteMemoryException.Unavailable.class,
                    () -> unreachable.retrieve(Scripts.user("什么")).block());
        }
    }

    /**
     * A metadata value AgentScope's codec (Jackson) cannot write failed build() with the codec's
     * own JsonException, "Failed to serialize object to JSON", naming neither the key nor why; now
     * both builders' IllegalArgumentException says where in the metadata and what Jackson said.
     */
    @Test
    void metadataTheCodecCannotWriteIsNamedAtBuild() {
        Map<String, Object> given = new java.util.LinkedHashMap<>();
        given.put("团队", "研发");
        given.put("来源", List.of("频道", new Object()));
        IllegalArgumentException nested = assertThrows(IllegalArgumentException.class,
                () -> RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("u").metadata(given).build());
        assertTrue(nested.getMessage().startsWith("metadata[\"来源\"][1]: a java.lang.Object cannot be written as JSON"
                + " by AgentScope's codec (No serializer found for class java.lang.Object"), nested.getMessage());
        Map<String, Object> loop = new java.util.HashMap<>();
        loop.put("自己", loop);
        IllegalArgumentException selfHolding = assertThrows(IllegalArgumentException.class,
                () -> RemoteLongTermMemoryMiddleware.builder().target("127.0.0.1:1").metadata(Map.of("环", loop))
                        .build());
        assertTrue(selfHolding.getMessage().startsWith("metadata[\"环\"]...: a java.util.HashMap cannot be written as"
                + " JSON by AgentScope's codec (Document nesting depth (1001) exceeds"), selfHolding.getMessage());
        // What it can write still builds, with nothing sent yet.
        given.put("来源", List.of("频道", 3, Map.of("深", true)));
        RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("u").metadata(given).build().close();
    }

    // ------------------------------------------------------------ the middleware, per call

    /**
     * As AgentScope's own builders: a null argument fails at the option's call, naming it, not later
     * in build() (mode(null) was a NullPointerException "mode" there) or at the first call.
     */
    @Test
    void middlewareBuilderRefusesANullArgumentAtTheOptionsCall() {
        RemoteLongTermMemoryMiddleware.Builder builder = RemoteLongTermMemoryMiddleware.builder()
                .connection(connection).mode(RemoteLongTermMemoryMiddleware.Mode.BOTH);
        NullPointerException mode = assertThrows(NullPointerException.class, () -> builder.mode(null));
        assertEquals("mode must not be null", mode.getMessage());
        java.util.Map<String, Object> nullKey = new java.util.HashMap<>();
        nullKey.put(null, "无键");
        assertEquals("metadata keys must not be null",
                assertThrows(NullPointerException.class, () -> builder.metadata(nullKey)).getMessage());
        assertEquals("closeWait must not be null",
                assertThrows(NullPointerException.class, () -> builder.closeWait(null)).getMessage());
        // A name the server refuses fails at agentName(...) too; null is the agent's own name.
        IllegalArgumentException blank = assertThrows(IllegalArgumentException.class, () -> builder.agentName("  "));
        assertEquals("scope.agent_name: must not be blank", blank.getMessage());
        // The refused options left the builder as it was: BOTH, the agent's own name.
        try (RemoteLongTermMemoryMiddleware ltm = builder.agentName("助手").agentName(null).build()) {
            ScriptedModel model = new ScriptedModel(List.of(List.of(text("好。"))));
            ReActAgent agent = agent(model).middleware(ltm).build();
            assertTrue(agent.getToolkit().getToolNames().contains("recordToMemory"));
            String userId = "张三-" + UUID.randomUUID();
            agent.call(List.of(Scripts.user("我喜欢京都。")), ctx(userId, "s-1")).block(WAIT);
            assertTrue(memories("Assistant", userId).contains("我喜欢京都。"), memories("Assistant", userId).toString());
        }
    }

    @Test
    void upstreamStaticHookRecordsTheDefaultSessionNotTheCalls() {
        // Why the middleware exists: with a RuntimeContext naming a user and session, AgentScope
        // 2.0.0's StaticLongTermMemoryHook records agent.getAgentState(), the default session's
        // context (empty here), so what the user said in that call is never recorded.
        String userId = "alice-" + UUID.randomUUID();
        try (RemoteLongTermMemory ltm = ltm(userId)) {
            ScriptedModel model = new ScriptedModel(List.of(List.of(text("好的，你住在杭州。"))));
            ReActAgent agent = agent(model).longTermMemory(ltm).longTermMemoryMode(LongTermMemoryMode.STATIC_CONTROL)
                    .build();
            call(agent, ctx(userId, "s-1"), "我住在杭州。");
            assertEquals(List.of(), memories("Assistant", userId));
        }
    }

    @Test
    void middlewareKeepsEachCallsUserInItsOwnScope() {
        // AgentScope's own StaticLongTermMemoryHook fails this: it has one fixed scope for both
        // users, and records the default session's context, not the calls' (the test above).
        String alice = "alice-" + UUID.randomUUID();
        String zhang = "张三-" + UUID.randomUUID();
        // What the middleware sends, seen on the wire (the server would also drop an injected
        // memory block from what it records, so the stored memories alone cannot show it).
        List<RecordRequest> records = new CopyOnWriteArrayList<>();
        ManagedChannel channel = server.channel();
        try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder()
                .channel(ClientInterceptors.intercept(channel, counting(new CopyOnWriteArrayList<>(), records))).build()) {
            ScriptedModel model = new ScriptedModel(List.of(
                    List.of(text("Noted, you live in Lisbon.")),
                    // 张三's first call takes a step: its text is recorded from the call's slot.
                    List.of(text("我查一下北京的天气。"), new ToolUseBlock("c1", "get_weather", Map.of("city", "北京"),
                            "{\"city\":\"北京\"}", Map.of())),
                    List.of(text("记住了，你住在成都。")),
                    List.of(text("You live in Lisbon.")),
                    List.of(text("你住在成都。"))));
            ReActAgent agent = agent(model).middleware(ltm).build();
            call(agent, ctx(alice, "alice-s1"), "I live in Lisbon.");
            call(agent, ctx(zhang, "张三-会话1"), "我住在成都，北京天气如何？");
            call(agent, ctx(alice, "alice-s2"), "Where do I live?");
            call(agent, ctx(zhang, "张三-会话2"), "我住在哪里？");

            // Each user's facts in that user's scope only, the injected memories never recorded.
            List<String> aliceFacts = memories("Assistant", alice);
            List<String> zhangFacts = memories("Assistant", zhang);
            assertTrue(aliceFacts.containsAll(List.of("I live in Lisbon.", "Noted, you live in Lisbon.",
                    "Where do I live?", "You live in Lisbon.")), aliceFacts.toString());
            // All the text the call added to its slot (the tool call and result hold none), which
            // AgentScope 2.0.0's static hook misses: it records the default session's context.
            assertTrue(zhangFacts.containsAll(List.of("我住在成都，北京天气如何？", "我查一下北京的天气。", "记住了，你住在成都。",
                    "我住在哪里？", "你住在成都。")), zhangFacts.toString());
            assertEquals(4, aliceFacts.size(), aliceFacts.toString());
            assertEquals(5, zhangFacts.size(), zhangFacts.toString());

            // The first calls found nothing to inject; the second call of each user got that
            // user's own earlier facts, never the other's, after its own message.
            assertFalse(model.calls().get(0).stream().anyMatch(LongTermMemoryAgentTest::isInjection));
            assertFalse(model.calls().get(1).stream().anyMatch(LongTermMemoryAgentTest::isInjection));
            assertFalse(model.calls().get(2).stream().anyMatch(LongTermMemoryAgentTest::isInjection));
            List<Msg> aliceSecond = model.calls().get(3);
            Msg aliceMemory = aliceSecond.get(aliceSecond.size() - 1);
            assertTrue(isInjection(aliceMemory) && aliceMemory.getTextContent().contains("Lisbon"), aliceSecond.toString());
            assertFalse(aliceMemory.getTextContent().contains("成都"), aliceMemory.getTextContent());
            assertEquals("Where do I live?", aliceSecond.get(aliceSecond.size() - 2).getTextContent());
            List<Msg> zhangSecond = model.calls().get(4);
            Msg zhangMemory = zhangSecond.get(zhangSecond.size() - 1);
            assertTrue(isInjection(zhangMemory) && zhangMemory.getTextContent().contains("成都"), zhangSecond.toString());
            assertFalse(zhangMemory.getTextContent().contains("Lisbon"), zhangMemory.getTextContent());
            // Sessions hold their own conversation (2.x state), the memory spans them.
            assertEquals(3, agent.getAgentState(zhang, "张三-会话2").getContext().size());

            // One Record per call, holding the text messages that call added, the injected one
            // never: alice's 2nd call sends its question and answer only.
            assertEquals(4, records.size());
            assertEquals(List.of("Where do I live?", "You live in Lisbon."), texts(records.get(2)));
            assertEquals(List.of("我住在成都，北京天气如何？", "我查一下北京的天气。", "记住了，你住在成都。"), texts(records.get(1)));
            assertTrue(records.stream().flatMap(r -> r.getMessagesList().stream())
                    .noneMatch(m -> m.getName().equals("long_term_memory")), records.toString());
            assertEquals(alice, records.get(2).getScope().getUserId());
            assertEquals("Assistant", records.get(2).getScope().getAgentName());
            assertEquals("", records.get(2).getScope().getRunName());
        } finally {
            channel.shutdownNow();
        }
    }

    @Test
    void middlewareWithTheSessionAsRunNameAndAFixedAgentName() {
        String user = "张三-" + UUID.randomUUID();
        try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder().connection(connection)
                .agentName("助手").sessionAsRunName(true).build()) {
            ScriptedModel model = new ScriptedModel(List.of(List.of(text("好。")), List.of(text("不知道。"))));
            ReActAgent agent = agent(model).middleware(ltm).build();
            call(agent, ctx(user, "会话-1"), "我的猫叫咪咪。");
            call(agent, ctx(user, "会话-2"), "我的猫叫什么？");
            Scope first = Scope.newBuilder().setAgentName("助手").setUserId(user).setRunName("会话-1").build();
            List<String> stored = connection.longTermMemoryService()
                    .listLongTermMemories(ListLongTermMemoriesRequest.newBuilder().setScope(first).build())
                    .getMemoriesList().stream().map(LongTermMemoryItem::getMemory).toList();
            assertEquals(java.util.Set.of("我的猫叫咪咪。", "好。"), java.util.Set.copyOf(stored));
            assertEquals(2, stored.size());
            // Another session is another run: nothing of the first injected.
            assertFalse(model.calls().get(1).stream().anyMatch(LongTermMemoryAgentTest::isInjection));
        }
    }

    @Test
    void aServerThatIsDownDoesNotFailTheCallUnlessAsked() {
        try (RemoteLongTermMemoryMiddleware down = RemoteLongTermMemoryMiddleware.builder().target("127.0.0.1:1")
                .maxAttempts(1).deadline(Duration.ofSeconds(5)).build()) {
            ScriptedModel model = new ScriptedModel(List.of(List.of(text("你好，爱丽丝。"))));
            ReActAgent agent = agent(model).middleware(down).build();
            Msg reply = call(agent, ctx("alice", "s-1"), "你好");
            assertEquals("你好，爱丽丝。", reply.getTextContent());
            assertFalse(model.calls().get(0).stream().anyMatch(LongTermMemoryAgentTest::isInjection));
        }
        try (RemoteLongTermMemoryMiddleware strict = RemoteLongTermMemoryMiddleware.builder().target("127.0.0.1:1")
                .maxAttempts(1).deadline(Duration.ofSeconds(5)).failOnError(true).build()) {
            ScriptedModel model = new ScriptedModel(List.of(List.of(text("你好。"))));
            ReActAgent agent = agent(model).middleware(strict).build();
            assertThrows(RemoteMemoryException.Unavailable.class, () -> call(agent, ctx("alice", "s-1"), "你好"));
            assertEquals(0, model.used());
            // A user id the server would refuse is the call's error too, named as the server names it.
            IllegalArgumentException blank = assertThrows(IllegalArgumentException.class,
                    () -> call(agent, ctx("   ", "s-1"), "你好"));
            assertEquals("scope.user_id: must not be blank", blank.getMessage());
        }
    }

    @Test
    void middlewareWithoutAContextUsesTheDefaultSessionAndTheAgentsScope() {
        String agentName = "助手-" + UUID.randomUUID();
        try (RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder().connection(connection)
                .agentName(agentName).build()) {
            ScriptedModel model = new ScriptedModel(List.of(List.of(text("好，你喜欢龙井。")), List.of(text("龙井。"))));
            ReActAgent agent = agent(model).middleware(ltm).build();
            agent.call(List.of(Scripts.user("我喜欢龙井茶。"))).block(WAIT);
            agent.call(List.of(Scripts.user("我喜欢什么茶？"))).block(WAIT);
            List<Msg> second = model.calls().get(1);
            assertTrue(isInjection(second.get(second.size() - 1))
                    && second.get(second.size() - 1).getTextContent().contains("我喜欢龙井茶。"), second.toString());
            Scope agentOnly = Scope.newBuilder().setAgentName(agentName).build();
            List<String> stored = connection.longTermMemoryService()
                    .listLongTermMemories(ListLongTermMemoriesRequest.newBuilder().setScope(agentOnly).build())
                    .getMemoriesList().stream().map(LongTermMemoryItem::getMemory).toList();
            assertEquals(java.util.Set.of("我喜欢龙井茶。", "好，你喜欢龙井。", "我喜欢什么茶？", "龙井。"), java.util.Set.copyOf(stored));
        }
    }
}
