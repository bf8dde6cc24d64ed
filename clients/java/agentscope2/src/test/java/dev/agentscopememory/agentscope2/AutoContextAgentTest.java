package dev.agentscopememory.agentscope2;

import static dev.agentscopememory.agentscope2.LongTermAgents.WAIT;
import static dev.agentscopememory.agentscope2.LongTermAgents.text;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.AutoContextConfig;
import dev.agentscopememory.client.AutoContextProfile;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.ScriptedLlmServer;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.client.TokenCounter;
import dev.agentscopememory.grpc.v1.AddMessagesRequest;
import dev.agentscopememory.grpc.v1.CompressionEvent;
import dev.agentscopememory.grpc.v1.GetMemoryRequest;
import dev.agentscopememory.grpc.v1.GetMessagesRequest;
import dev.agentscopememory.grpc.v1.GetOriginalMessagesRequest;
import dev.agentscopememory.grpc.v1.ListCompressionEventsRequest;
import dev.agentscopememory.grpc.v1.Memory;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.RuntimeContext;
import io.agentscope.core.message.Base64Source;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.DataBlock;
import io.agentscope.core.message.HintBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.state.AgentState;
import io.agentscope.core.state.AgentStateStore;
import io.agentscope.core.state.InMemoryAgentStateStore;
import io.agentscope.core.tool.Tool;
import io.agentscope.core.tool.ToolParam;
import io.agentscope.core.tool.Toolkit;
import io.agentscope.core.util.JsonUtils;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link RemoteAutoContextMiddleware} on a real AgentScope-Java 2.0.0 {@code ReActAgent} with a
 * scripted model, on the real server, whose summariser is the scripted OpenAI-compatible endpoint.
 * Every agent compresses at 6 working messages and keeps the last 2 (improved profile, the
 * default).
 */
class AutoContextAgentTest {

    /** What the scripted summariser answers. */
    static final String SUMMARY = "早先的对话：用户问了几个问题，助手都作答了。";

    static final Pattern OFFLOAD = Pattern.compile("<!-- CONTEXT_OFFLOAD: uuid=([0-9a-f-]{36}) -->");

    private static ScriptedLlmServer llm;
    private static TestServer server;
    private static RemoteConnection connection;

    @BeforeAll
    static void start() throws Exception {
        llm = new ScriptedLlmServer(SUMMARY, 10, 20);
        server = TestServer.start(Map.of(
                "AGENTSCOPE_MEMORY_LLM_BASE_URL", llm.baseUrl(),
                "AGENTSCOPE_MEMORY_LLM_API_KEY", "scripted",
                "AGENTSCOPE_MEMORY_LLM_MODEL", "scripted"));
        connection = LongTermAgents.connect(server.target());
    }

    @AfterAll
    static void stop() {
        connection.close();
        server.close();
        llm.close();
    }

    static AutoContextConfig small() {
        return AutoContextConfig.builder().msgThreshold(6).lastKeep(2).minCompressionTokenThreshold(0).build();
    }

    /** The tool each scripted round calls; the archive on 护照 holds the fact the tests plant. */
    public static class ArchiveTools {
        @Tool(name = "read_archive", description = "Reads the user's archive on a topic")
        public String readArchive(@ToolParam(name = "topic", description = "The topic") String topic) {
            return "档案《" + topic + "》：" + ("护照".equals(topic) ? "护照号码 E12345678" : "没有特别的记录");
        }
    }

    static RemoteAutoContextMiddleware.Builder middleware() {
        return RemoteAutoContextMiddleware.builder().connection(connection).config(small());
    }

    static ReActAgent agent(ScriptedModel model, AgentStateStore store, RemoteAutoContextMiddleware autoContext) {
        return ReActAgent.builder().name("Assistant").sysPrompt("你是一个乐于助人的助手。").model(model)
                .toolkit(toolkit()).maxIters(5).stateStore(store).middleware(autoContext).build();
    }

    static Toolkit toolkit() {
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(new ArchiveTools());
        return toolkit;
    }

    static RuntimeContext ctx(String userId, String sessionId) {
        return RuntimeContext.builder().userId(userId).sessionId(sessionId).build();
    }

    static Msg user(String text) {
        return Scripts.user(text);
    }

    static Msg call(ReActAgent agent, RuntimeContext ctx, String text) {
        return agent.call(List.of(user(text)), ctx).block(WAIT);
    }

    /** One plain answer per call, {@code count} times. */
    static List<Function<List<Msg>, List<ContentBlock>>> answers(String who, int count) {
        List<Function<List<Msg>, List<ContentBlock>>> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String answer = who + "的回答 " + i;
            out.add(in -> List.of(text(answer)));
        }
        return out;
    }

    /**
     * Per call, a round of two steps: the model reads the archive on the call's topic, then
     * answers ({@code 助手的回答 i}). Only rounds with steps between question and answer are
     * summarised (AgentScope's strategy 4 keeps the question and replaces the rest), so a
     * conversation of these compresses from the second call's second step on.
     */
    static List<Function<List<Msg>, List<ContentBlock>>> rounds(String... topics) {
        List<Function<List<Msg>, List<ContentBlock>>> out = new ArrayList<>();
        for (int i = 0; i < topics.length; i++) {
            String topic = topics[i];
            // Tool call ids unique in a conversation, as a model's are (2.0.0 pairs calls and
            // results by id).
            String id = "call-" + i + "-" + topic;
            String answer = "助手的回答 " + i;
            out.add(in -> List.of(new ToolUseBlock(id, "read_archive", Map.of("topic", topic),
                    "{\"topic\":\"" + topic + "\"}", Map.of())));
            out.add(in -> List.of(text(answer)));
        }
        return out;
    }

    static String allText(List<Msg> msgs) {
        return msgs.stream().map(AutoContextAgentTest::textOf).collect(Collectors.joining("\n"));
    }

    /** A message's texts, tool results' included. */
    static String textOf(Msg m) {
        StringBuilder out = new StringBuilder(m.getTextContent());
        for (ToolResultBlock r : m.getContentBlocks(ToolResultBlock.class)) {
            for (ContentBlock b : r.getOutput()) {
                if (b instanceof TextBlock t) {
                    out.append(t.getText());
                }
            }
        }
        return out.toString();
    }

    static boolean hasOffloadMarker(List<Msg> msgs) {
        return msgs.stream().anyMatch(m -> m.getRole() != MsgRole.SYSTEM && OFFLOAD.matcher(m.getTextContent()).find());
    }

    static List<CompressionEvent> events(String memoryId) {
        return connection.memoryService()
                .listCompressionEvents(ListCompressionEventsRequest.newBuilder().setMemoryId(memoryId).build())
                .getEventsList();
    }

    static String workingText(String memoryId) {
        return connection.memoryService().getMessages(GetMessagesRequest.newBuilder().setMemoryId(memoryId).build())
                .getMessagesList().stream()
                .map(m -> m.getContentList().stream().map(b -> b.getText().getText()).collect(Collectors.joining()))
                .collect(Collectors.joining("\n"));
    }

    /** Counts the messages sent by {@code AddMessages} through the channel. */
    static ClientInterceptor countingAdds(AtomicInteger added) {
        return new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                    @Override
                    public void sendMessage(Q message) {
                        if (message instanceof AddMessagesRequest r) {
                            added.addAndGet(r.getMessagesCount());
                        }
                        super.sendMessage(message);
                    }
                };
            }
        };
    }

    @Test
    void builderRefusesANullArgumentAtTheOptionsCallNamingIt() {
        RemoteAutoContextMiddleware.Builder builder = RemoteAutoContextMiddleware.builder();
        assertEquals("config must not be null",
                assertThrows(NullPointerException.class, () -> builder.config(null)).getMessage());
        assertEquals("profile must not be null",
                assertThrows(NullPointerException.class, () -> builder.profile(null)).getMessage());
        assertEquals("tokenCounter must not be null",
                assertThrows(NullPointerException.class, () -> builder.tokenCounter(null)).getMessage());
        assertEquals("memoryId must not be null",
                assertThrows(NullPointerException.class, () -> builder.memoryId(null)).getMessage());
    }

    @Test
    void aConversationOverTheThresholdIsCompressedForTheModelAndInTheAgentState() {
        String userId = "张三-" + UUID.randomUUID();
        ScriptedModel model = ScriptedModel.answering(rounds("天气", "书", "电影"));
        try (RemoteAutoContextMiddleware autoContext = middleware().build()) {
            ReActAgent agent = agent(model, new InMemoryAgentStateStore(), autoContext);
            RuntimeContext ctx = ctx(userId, "会话-1");
            for (int i = 0; i < 3; i++) {
                call(agent, ctx, "第" + i + "个问题：查一下我的档案。");
            }
            String memoryId = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", userId, "会话-1");

            // Below the threshold the model reads the whole conversation, as the agent holds it:
            // system, question, call, result, answer, question.
            assertEquals(6, model.calls().get(2).size());
            assertFalse(hasOffloadMarker(model.calls().get(2)));
            // Above it: the summary with its offload marker, and fewer messages than the 12 the
            // agent would send (system, 2 rounds of 4, the question, its call and result).
            List<Msg> last = model.calls().get(5);
            assertTrue(hasOffloadMarker(last), allText(last));
            assertTrue(allText(last).contains(SUMMARY), allText(last));
            assertTrue(last.size() < 12, "model input of " + last.size() + " messages");
            assertFalse(allText(last).contains("助手的回答 0"), allText(last));
            assertEquals(MsgRole.TOOL, last.get(last.size() - 1).getRole());
            assertTrue(textOf(last.get(last.size() - 1)).contains("档案《电影》"));
            // The system message carries AgentScope's offload instruction after the agent's prompt.
            assertTrue(last.get(0).getTextContent().startsWith("你是一个乐于助人的助手。"));
            assertTrue(last.get(0).getTextContent().contains("context_reload"), last.get(0).getTextContent());
            // The server recorded the compressions, and the agent's own context is the compressed
            // one (what its store saves), followed by the last answer.
            assertFalse(events(memoryId).isEmpty());
            List<Msg> context = agent.getAgentState(userId, "会话-1").getContext();
            assertEquals(last.subList(1, last.size()).stream().map(Msg::getId).toList(),
                    context.subList(0, context.size() - 1).stream().map(Msg::getId).toList());
            assertEquals("助手的回答 2", context.get(context.size() - 1).getTextContent());
        }
    }

    @Test
    void aChineseFactCompressedAwayIsRecoveredThroughContextReload() {
        String userId = "李四-" + UUID.randomUUID();
        List<Function<List<Msg>, List<ContentBlock>>> script = new ArrayList<>(rounds("护照", "天气", "书"));
        // The question's step: the fact is no longer in the model's input; it reloads the oldest offload.
        script.add(in -> {
            Matcher m = OFFLOAD.matcher(allText(in));
            assertTrue(m.find(), allText(in));
            return List.of(new ToolUseBlock("reload-1", RemoteAutoContextMiddleware.TOOL_NAME,
                    Map.of("working_context_offload_uuid", m.group(1)),
                    "{\"working_context_offload_uuid\":\"" + m.group(1) + "\"}", Map.of()));
        });
        script.add(in -> List.of(text("你的护照号码是 E12345678。")));
        ScriptedModel model = ScriptedModel.answering(script);
        try (RemoteAutoContextMiddleware autoContext = middleware().build()) {
            ReActAgent agent = agent(model, new InMemoryAgentStateStore(), autoContext);
            RuntimeContext ctx = ctx(userId, "会话-2");
            call(agent, ctx, "查一下我的护照档案。");
            call(agent, ctx, "再查一下天气档案。");
            call(agent, ctx, "还有书的档案。");
            Msg reply = call(agent, ctx, "我的护照号码是多少？");

            assertEquals("你的护照号码是 E12345678。", reply.getTextContent());
            // The model was offered the tool and saw no fact before the reload...
            List<Msg> asked = model.calls().get(6);
            assertFalse(allText(asked).contains("E12345678"), allText(asked));
            assertTrue(model.tools().get(6).stream().anyMatch(t -> RemoteAutoContextMiddleware.TOOL_NAME.equals(t.getName())));
            // ...and the tool's result, read from this slot's memory, brought it back.
            List<Msg> answered = model.calls().get(7);
            Msg toolResult = answered.get(answered.size() - 1);
            assertEquals(MsgRole.TOOL, toolResult.getRole());
            assertTrue(textOf(toolResult).contains("护照号码 E12345678"), textOf(toolResult));
        }
    }

    @Test
    void contextReloadAnswersAsAgentScopesToolForABlankOrUnknownUuid() {
        String userId = "王五-" + UUID.randomUUID();
        ScriptedModel model = new ScriptedModel(List.of(
                List.of(new ToolUseBlock("r1", RemoteAutoContextMiddleware.TOOL_NAME,
                        Map.of("working_context_offload_uuid", " "), "{\"working_context_offload_uuid\":\" \"}", Map.of()),
                        new ToolUseBlock("r2", RemoteAutoContextMiddleware.TOOL_NAME,
                                Map.of("working_context_offload_uuid", "无此编号"),
                                "{\"working_context_offload_uuid\":\"无此编号\"}", Map.of())),
                List.of(text("没有找到。"))));
        try (RemoteAutoContextMiddleware autoContext = middleware().build()) {
            ReActAgent agent = agent(model, new InMemoryAgentStateStore(), autoContext);
            call(agent, ctx(userId, "会话-3"), "重新载入一下。");
            String results = allText(model.calls().get(1));
            assertTrue(results.contains("Error: UUID cannot be null or empty."), results);
            assertTrue(results.contains("No messages found for UUID: 无此编号"), results);
        }
    }

    /** A tool of {@code context_reload}'s name that is not the middleware's. */
    public static class OwnReloadTool {
        @Tool(name = "context_reload", description = "The application's own")
        public String reload(@ToolParam(name = "working_context_offload_uuid", description = "uuid") String uuid) {
            return "mine";
        }
    }

    @Test
    void anAgentWithAContextReloadToolOfItsOwnIsRefusedAtBuild() {
        try (RemoteAutoContextMiddleware autoContext = middleware().build()) {
            Toolkit toolkit = toolkit();
            toolkit.registerTool(new OwnReloadTool());
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> ReActAgent.builder()
                    .name("Assistant").model(ScriptedModel.answering(answers("助手", 1))).toolkit(toolkit)
                    .stateStore(new InMemoryAgentStateStore()).middleware(autoContext).build());
            assertTrue(e.getMessage().contains("already has one"), e.getMessage());
            // A second AutoContext middleware on one agent is refused the same way.
            try (RemoteAutoContextMiddleware second = middleware().build()) {
                assertThrows(IllegalStateException.class, () -> ReActAgent.builder().name("Assistant")
                        .model(ScriptedModel.answering(answers("助手", 1))).toolkit(toolkit())
                        .stateStore(new InMemoryAgentStateStore()).middleware(autoContext).middleware(second).build());
            }
        }
    }

    @Test
    void twoUsersAndTwoSessionsOnOneAgentStayApart() {
        String alice = "爱丽丝-" + UUID.randomUUID();
        String bob = "鲍勃-" + UUID.randomUUID();
        ScriptedModel model = ScriptedModel.answering(answers("助手", 6));
        try (RemoteAutoContextMiddleware autoContext = middleware().build()) {
            ReActAgent agent = agent(model, new InMemoryAgentStateStore(), autoContext);
            call(agent, ctx(alice, "会话"), "爱丽丝的秘密：喜欢绿茶。");
            call(agent, ctx(bob, "会话"), "鲍勃的秘密：喜欢咖啡。");
            call(agent, ctx(alice, "另一个会话"), "爱丽丝在另一个会话里：喜欢红茶。");
            call(agent, ctx(bob, "会话"), "我喜欢什么？");
            call(agent, ctx(alice, "会话"), "我喜欢什么？");
            call(agent, ctx(alice, "另一个会话"), "我喜欢什么？");

            // Each call's model input holds its own slot's conversation only.
            assertEquals(List.of("鲍勃的秘密：喜欢咖啡。", "助手的回答 1", "我喜欢什么？"),
                    model.calls().get(3).subList(1, 4).stream().map(Msg::getTextContent).toList());
            assertEquals(List.of("爱丽丝的秘密：喜欢绿茶。", "助手的回答 0", "我喜欢什么？"),
                    model.calls().get(4).subList(1, 4).stream().map(Msg::getTextContent).toList());
            assertEquals(List.of("爱丽丝在另一个会话里：喜欢红茶。", "助手的回答 2", "我喜欢什么？"),
                    model.calls().get(5).subList(1, 4).stream().map(Msg::getTextContent).toList());
            // Three memories on the server, each with its own messages.
            String aliceOne = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", alice, "会话");
            String bobOne = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", bob, "会话");
            String aliceTwo = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", alice, "另一个会话");
            assertEquals(3, new HashSet<>(List.of(aliceOne, bobOne, aliceTwo)).size());
            assertTrue(workingText(aliceOne).contains("绿茶") && !workingText(aliceOne).contains("咖啡")
                    && !workingText(aliceOne).contains("红茶"));
            assertTrue(workingText(bobOne).contains("咖啡") && !workingText(bobOne).contains("茶"));
            assertTrue(workingText(aliceTwo).contains("红茶") && !workingText(aliceTwo).contains("绿茶"));
        }
    }

    @Test
    void eachSlotsMemoryIsCreatedWithTheBuildersConfigProfileAndId() {
        String userId = "钱九-" + UUID.randomUUID();
        ScriptedModel model = ScriptedModel.answering(answers("助手", 2));
        try (RemoteAutoContextMiddleware autoContext = middleware()
                .memoryId((agentName, user, session) -> "自定义/" + agentName + "/" + user + "/" + session).build()) {
            call(agent(model, new InMemoryAgentStateStore(), autoContext), ctx(userId, "会话-8"), "你好。");
        }
        Memory memory = connection.memoryService().getMemory(GetMemoryRequest.newBuilder()
                .setMemoryId("自定义/Assistant/" + userId + "/会话-8").build()).getMemory();
        assertEquals(dev.agentscopememory.grpc.v1.MemoryKind.MEMORY_KIND_AUTO_CONTEXT, memory.getKind());
        // The question and the reply, sent when the call ended.
        assertEquals(2, memory.getMessageCount());
        dev.agentscopememory.grpc.v1.AutoContextConfig config = memory.getAutoContextConfig();
        assertEquals(List.of(6, 2, 0), List.of(config.getMsgThreshold(), config.getLastKeep(),
                config.getMinCompressionTokenThreshold()));
        // Improved is this middleware's default.
        assertEquals(dev.agentscopememory.grpc.v1.AutoContextProfile.AUTO_CONTEXT_PROFILE_IMPROVED, config.getProfile());
        assertEquals(dev.agentscopememory.grpc.v1.TokenCounter.TOKEN_COUNTER_JAVA_ESTIMATE, config.getTokenCounter());

        String other = "周十-" + UUID.randomUUID();
        try (RemoteAutoContextMiddleware autoContext = middleware().profile(AutoContextProfile.PARITY).build()) {
            call(agent(ScriptedModel.answering(answers("助手", 1)), new InMemoryAgentStateStore(), autoContext),
                    ctx(other, "会话-9"), "你好。");
        }
        assertEquals(dev.agentscopememory.grpc.v1.AutoContextProfile.AUTO_CONTEXT_PROFILE_PARITY,
                connection.memoryService().getMemory(GetMemoryRequest.newBuilder()
                        .setMemoryId(RemoteAutoContextMiddleware.defaultMemoryId("Assistant", other, "会话-9")).build())
                        .getMemory().getAutoContextConfig().getProfile());
        // What the server would refuse at the first call is refused when the middleware is built.
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> middleware()
                .profile(AutoContextProfile.PARITY).tokenCounter(TokenCounter.CL100K).build());
        assertTrue(e.getMessage().startsWith("tokenCounter:"), e.getMessage());
    }

    @Test
    void aCallNamingNoUserNorSessionUsesTheAnonymousUsersDefaultSession() {
        ScriptedModel model = ScriptedModel.answering(answers("助手", 2));
        try (RemoteAutoContextMiddleware autoContext = middleware().build()) {
            ReActAgent agent = agent(model, new InMemoryAgentStateStore(), autoContext);
            agent.call(List.of(user("没有会话的问题。"))).block(WAIT);
            agent.call(List.of(user("第二个问题。"))).block(WAIT);
        }
        assertEquals(List.of("没有会话的问题。", "助手的回答 0", "第二个问题。"),
                model.calls().get(1).subList(1, 4).stream().map(Msg::getTextContent).toList());
        // 2.0.0's default session is the agent's name.
        String memoryId = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", null, "Assistant");
        assertEquals(4, connection.memoryService().getMemory(GetMemoryRequest.newBuilder().setMemoryId(memoryId).build())
                .getMemory().getMessageCount());
    }

    @Test
    void defaultMemoryIdsNeverCollideAndStayWithinTheServersLimit() {
        // A separator inside an id cannot make two slots one.
        assertFalse(RemoteAutoContextMiddleware.defaultMemoryId("a", "b:c", "d")
                .equals(RemoteAutoContextMiddleware.defaultMemoryId("a", "b", "c:d")));
        assertFalse(RemoteAutoContextMiddleware.defaultMemoryId("a", "b%3Ac", "d")
                .equals(RemoteAutoContextMiddleware.defaultMemoryId("a", "b:c", "d")));
        // The anonymous user has its own memories, never a session id's (1.x's memory id).
        assertFalse(RemoteAutoContextMiddleware.defaultMemoryId("Assistant", null, "s1").equals("s1"));
        String longId = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", "用".repeat(80), "会".repeat(80));
        assertTrue(longId.startsWith(RemoteAutoContextMiddleware.DEFAULT_ID_PREFIX + "sha256:"), longId);
        assertTrue(longId.getBytes(java.nio.charset.StandardCharsets.UTF_8).length <= 256);
    }

    @Test
    void anAgentRebuiltFromItsSavedStateSendsOnlyNewMessagesAndKeepsTheCompression() {
        String userId = "赵六-" + UUID.randomUUID();
        RuntimeContext ctx = ctx(userId, "会话-4");
        try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().connection(connection).build()) {
            ScriptedModel first = ScriptedModel.answering(rounds("书", "电影", "音乐"));
            List<Msg> compressed;
            try (RemoteAutoContextMiddleware autoContext = middleware().build()) {
                ReActAgent agent = agent(first, store, autoContext);
                for (int i = 0; i < 3; i++) {
                    call(agent, ctx, "第" + i + "个问题：查一下档案。");
                }
                compressed = first.calls().get(5);
                assertTrue(hasOffloadMarker(compressed));
            }
            // The store saved the compressed context.
            AgentState saved = store.get(userId, "会话-4", "agent_state", AgentState.class).orElseThrow();
            assertTrue(hasOffloadMarker(saved.getContext()), allText(saved.getContext()));
            assertFalse(allText(saved.getContext()).contains("助手的回答 0"), allText(saved.getContext()));

            // A new agent and middleware (a restarted process), on the same store and server.
            AtomicInteger added = new AtomicInteger();
            ManagedChannel channel = server.channel();
            ScriptedModel second = ScriptedModel.answering(answers("新助手", 1));
            try (RemoteAutoContextMiddleware autoContext = RemoteAutoContextMiddleware.builder()
                    .channel(ClientInterceptors.intercept(channel, countingAdds(added)))
                    .deadline(Duration.ofSeconds(120)).config(small()).build()) {
                ReActAgent rebuilt = agent(second, store, autoContext);
                call(rebuilt, ctx, "第5个问题：还有别的吗？");
            } finally {
                channel.shutdownNow();
            }
            // Only the new question and its answer: the previous call's was sent when that call ended.
            assertEquals(2, added.get());
            List<Msg> input = second.calls().get(0);
            assertTrue(hasOffloadMarker(input), allText(input));
            assertEquals(input.size(), new HashSet<>(input.stream().map(Msg::getId).toList()).size());
            assertTrue(input.size() <= compressed.size() + 2, input.size() + " messages after " + compressed.size());
            assertEquals("第5个问题：还有别的吗？", input.get(input.size() - 1).getTextContent());
        }
    }

    @Test
    void twoProcessesServingOneSessionInTurnNeverSendAMessageTwice() {
        String userId = "吴一-" + UUID.randomUUID();
        RuntimeContext ctx = ctx(userId, "会话-10");
        AtomicInteger added = new AtomicInteger();
        ManagedChannel channelA = server.channel();
        ManagedChannel channelB = server.channel();
        // Two processes (replicas) behind one state store, each with its own middleware.
        try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().connection(connection).build();
                RemoteAutoContextMiddleware a = RemoteAutoContextMiddleware.builder()
                        .channel(ClientInterceptors.intercept(channelA, countingAdds(added))).build();
                RemoteAutoContextMiddleware b = RemoteAutoContextMiddleware.builder()
                        .channel(ClientInterceptors.intercept(channelB, countingAdds(added))).build()) {
            ReActAgent onA = agent(ScriptedModel.answering("a", rounds("书", "音乐")), store, a);
            ReActAgent onB = agent(ScriptedModel.answering("b", rounds("电影", "天气")), store, b);
            call(onA, ctx, "第0个问题。");
            call(onB, ctx, "第1个问题。");
            call(onA, ctx, "第2个问题。");
            call(onB, ctx, "第3个问题。");
        } finally {
            channelA.shutdownNow();
            channelB.shutdownNow();
        }
        // 4 rounds of question, call, result and answer, each answer sent when its call ended.
        String memoryId = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", userId, "会话-10");
        List<String> ids = connection.memoryService().getOriginalMessages(GetOriginalMessagesRequest.newBuilder()
                .setMemoryId(memoryId).build()).getMessagesList().stream().map(m -> m.getId()).toList();
        assertEquals(16, ids.size(), ids.toString());
        assertEquals(16, new HashSet<>(ids).size(), ids.toString());
        assertEquals(16, added.get());
    }

    @Test
    void keptMessagesComeBackWithTheirTwoPointXOnlyParts() {
        String userId = "孙七-" + UUID.randomUUID();
        ScriptedModel model = ScriptedModel.answering(rounds("笑话", "谜语", "故事"));
        try (RemoteAutoContextMiddleware autoContext = middleware().build()) {
            ReActAgent agent = agent(model, new InMemoryAgentStateStore(), autoContext);
            RuntimeContext ctx = ctx(userId, "会话-5");
            call(agent, ctx, "讲个笑话。");
            call(agent, ctx, "再出个谜语。");
            // The compressing call's input carries a data block and a hint block, neither of
            // which the server can store.
            Msg question = Msg.builder().role(MsgRole.USER).name("user")
                    .content(List.of(TextBlock.builder().text("讲个故事，附件是我喜欢的。").build(),
                            DataBlock.builder().name("故事.txt").source(Base64Source.builder()
                                    .mediaType("text/plain").data("5pyJ6Laj").build()).build()))
                    .build();
            Msg hint = Msg.builder().role(MsgRole.ASSISTANT).name("团队")
                    .content(List.of(new HintBlock("hint-1", "用户喜欢冷笑话。", "爱丽丝")))
                    .metadata(Map.of("来源", "团队频道")).build();
            agent.call(List.of(hint, question), ctx).block(WAIT);

            // The compressing step: the earlier rounds became a summary, the current one is kept.
            List<Msg> input = model.calls().get(5);
            assertTrue(hasOffloadMarker(input), allText(input));
            List<Msg> saved = agent.getAgentState(userId, "会话-5").getContext();
            for (Msg given : List.of(question, hint)) {
                String json = JsonUtils.getJsonCodec().toJson(given);
                assertEquals(json, JsonUtils.getJsonCodec().toJson(byId(input, given.getId())));
                assertEquals(json, JsonUtils.getJsonCodec().toJson(byId(saved, given.getId())));
            }
            // The server got the hint as the text the model reads, and no data block.
            String memoryId = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", userId, "会话-5");
            assertTrue(workingText(memoryId).contains("用户喜欢冷笑话。"), workingText(memoryId));
            // The kept tool call is the agent's own message, with the model's usage.
            Msg keptCall = input.stream().filter(m -> m.getContentBlocks(ToolUseBlock.class).stream()
                    .anyMatch(t -> "call-2-故事".equals(t.getId()))).findFirst().orElseThrow();
            assertNotNull(keptCall.getUsage());
            assertEquals(104, keptCall.getUsage().getInputTokens());
        }
    }

    /** Fails every {@code AddMessages} after the first {@code allowed} (UNAVAILABLE), as a server gone would. */
    static ClientInterceptor failingAddsAfter(AtomicInteger allowed) {
        return new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                if (!method.getBareMethodName().equals("AddMessages") || allowed.getAndDecrement() > 0) {
                    return next.newCall(method, options);
                }
                return new ClientCall<>() {
                    @Override
                    public void start(Listener<R> listener, io.grpc.Metadata headers) {
                        listener.onClose(io.grpc.Status.UNAVAILABLE.withDescription("服务器走开了"), new io.grpc.Metadata());
                    }

                    @Override
                    public void request(int n) {}

                    @Override
                    public void cancel(String message, Throwable cause) {}

                    @Override
                    public void halfClose() {}

                    @Override
                    public void sendMessage(Q message) {}
                };
            }
        };
    }

    static List<dev.agentscopememory.grpc.v1.Msg> stored(String memoryId) {
        return connection.memoryService().getOriginalMessages(GetOriginalMessagesRequest.newBuilder()
                .setMemoryId(memoryId).build()).getMessagesList();
    }

    /**
     * A call's final reply reached the server only with the slot's next step, so a process that
     * ended after replying never sent it (right after this call the memory held the question, the
     * tool call and its result: 3 messages, not the reply). Now it is sent when the call ends, once:
     * the next call sends its own messages only.
     */
    @Test
    void theCallsReplyReachesTheServerWhenTheCallEnds() {
        String userId = "郑二-" + UUID.randomUUID();
        RuntimeContext ctx = ctx(userId, "会话-11");
        String memoryId = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", userId, "会话-11");
        AtomicInteger added = new AtomicInteger();
        ManagedChannel channel = server.channel();
        List<Function<List<Msg>, List<ContentBlock>>> script = new ArrayList<>(rounds("护照"));
        script.addAll(answers("再答", 1));
        ScriptedModel model = ScriptedModel.answering(script);
        // No compression here: the stored messages are the conversation's.
        try (RemoteAutoContextMiddleware autoContext = RemoteAutoContextMiddleware.builder()
                .channel(ClientInterceptors.intercept(channel, countingAdds(added))).deadline(Duration.ofSeconds(120))
                .config(AutoContextConfig.builder().msgThreshold(60).lastKeep(20).build()).build()) {
            ReActAgent agent = agent(model, new InMemoryAgentStateStore(), autoContext);
            Msg reply = call(agent, ctx, "查一下我的护照档案。");
            List<dev.agentscopememory.grpc.v1.Msg> afterFirst = stored(memoryId);
            assertEquals(4, afterFirst.size(), afterFirst.toString());
            assertEquals(reply.getId(), afterFirst.get(3).getId());
            assertEquals("助手的回答 0", afterFirst.get(3).getContent(0).getText().getText());
            assertEquals(4, added.get());

            Msg second = call(agent, ctx, "谢谢。");
            List<String> ids = stored(memoryId).stream().map(dev.agentscopememory.grpc.v1.Msg::getId).toList();
            assertEquals(6, ids.size(), ids.toString());
            assertEquals(6, new HashSet<>(ids).size(), ids.toString());
            assertEquals(second.getId(), ids.get(5));
            assertEquals(6, added.get());
            // The model's second call saw the first reply once.
            assertEquals(1, model.calls().get(2).stream().filter(m -> reply.getId().equals(m.getId())).count());
        } finally {
            channel.shutdownNow();
        }
    }

    /**
     * The reply's add fails as a step's does: logged, the call's reply stands and the reply goes
     * with the next step; with failOnError the call fails with it.
     */
    @Test
    void aFailedReplyAddIsLoggedOrFailsTheCallWhenAsked() {
        String userId = "冯三-" + UUID.randomUUID();
        String memoryId = RemoteAutoContextMiddleware.defaultMemoryId("Assistant", userId, "会话-12");
        AtomicInteger allowed = new AtomicInteger(1);
        ManagedChannel channel = server.channel();
        ScriptedModel model = ScriptedModel.answering(answers("助手", 2));
        try (RemoteAutoContextMiddleware autoContext = RemoteAutoContextMiddleware.builder()
                .channel(ClientInterceptors.intercept(channel, failingAddsAfter(allowed))).maxAttempts(1)
                .deadline(Duration.ofSeconds(120)).config(AutoContextConfig.builder().msgThreshold(60).build()).build()) {
            ReActAgent agent = agent(model, new InMemoryAgentStateStore(), autoContext);
            Msg reply = call(agent, ctx(userId, "会话-12"), "第一个问题。");
            assertEquals("助手的回答 0", reply.getTextContent());
            assertEquals(List.of("第一个问题。"), stored(memoryId).stream()
                    .map(m -> m.getContent(0).getText().getText()).toList());
            allowed.set(100);
            call(agent, ctx(userId, "会话-12"), "第二个问题。");
            assertEquals(List.of("第一个问题。", "助手的回答 0", "第二个问题。", "助手的回答 1"), stored(memoryId).stream()
                    .map(m -> m.getContent(0).getText().getText()).toList());
        } finally {
            channel.shutdownNow();
        }

        AtomicInteger strictAllowed = new AtomicInteger(1);
        ManagedChannel strictChannel = server.channel();
        ScriptedModel strictModel = ScriptedModel.answering(answers("助手", 1));
        try (RemoteAutoContextMiddleware autoContext = RemoteAutoContextMiddleware.builder()
                .channel(ClientInterceptors.intercept(strictChannel, failingAddsAfter(strictAllowed))).maxAttempts(1)
                .deadline(Duration.ofSeconds(120)).failOnError(true).build()) {
            ReActAgent agent = agent(strictModel, new InMemoryAgentStateStore(), autoContext);
            Throwable e = assertThrows(Throwable.class, () -> call(agent, ctx(userId, "会话-13"), "这次应该失败。"));
            Throwable cause = e;
            while (cause != null && !(cause instanceof RemoteMemoryException)) {
                cause = cause.getCause();
            }
            assertTrue(cause instanceof RemoteMemoryException.Unavailable, String.valueOf(e));
            assertEquals(1, strictModel.used());
        } finally {
            strictChannel.shutdownNow();
        }
    }

    static Msg byId(List<Msg> msgs, String id) {
        return msgs.stream().filter(m -> id.equals(m.getId())).findFirst().orElseThrow();
    }

    @Test
    void withTheServerDownTheCallGoesOnUncompressedOrFailsWhenAsked() throws Exception {
        TestServer gone = TestServer.start();
        String target = gone.target();
        gone.close();
        ScriptedModel model = ScriptedModel.answering(answers("助手", 1));
        try (RemoteAutoContextMiddleware autoContext = RemoteAutoContextMiddleware.builder().target(target)
                .deadline(Duration.ofSeconds(2)).maxAttempts(1).config(small()).build()) {
            ReActAgent agent = agent(model, new InMemoryAgentStateStore(), autoContext);
            Msg reply = call(agent, ctx("周八", "会话-6"), "服务器不在也要回答。");
            assertEquals("助手的回答 0", reply.getTextContent());
            List<Msg> input = model.calls().get(0);
            assertEquals(List.of("你是一个乐于助人的助手。", "服务器不在也要回答。"),
                    input.stream().map(Msg::getTextContent).toList());
        }

        ScriptedModel unused = ScriptedModel.answering(answers("助手", 1));
        try (RemoteAutoContextMiddleware autoContext = RemoteAutoContextMiddleware.builder().target(target)
                .deadline(Duration.ofSeconds(2)).maxAttempts(1).config(small()).failOnError(true).build()) {
            ReActAgent agent = agent(unused, new InMemoryAgentStateStore(), autoContext);
            Throwable e = assertThrows(Throwable.class, () -> call(agent, ctx("周八", "会话-7"), "这次应该失败。"));
            Throwable cause = e;
            while (cause != null && !(cause instanceof RemoteMemoryException)) {
                cause = cause.getCause();
            }
            assertTrue(cause instanceof RemoteMemoryException.Unavailable, String.valueOf(e));
            assertEquals(0, unused.used());
        }
    }
}
