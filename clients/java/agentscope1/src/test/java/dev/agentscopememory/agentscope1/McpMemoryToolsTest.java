package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.examples.McpMemoryExample;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.model.ChatResponse;
import io.agentscope.core.model.ChatUsage;
import io.agentscope.core.model.GenerateOptions;
import io.agentscope.core.model.Model;
import io.agentscope.core.model.ToolSchema;
import io.agentscope.core.tool.Toolkit;
import io.agentscope.core.tool.mcp.McpClientBuilder;
import io.agentscope.core.tool.mcp.McpClientWrapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;

/**
 * AgentScope-Java's own MCP client ({@code McpClientBuilder}, MCP Java SDK from Maven Central)
 * against the server's MCP endpoint: over streamable HTTP and over stdio
 * ({@code agentscope-memory mcp --target}), the memory tools land on a {@code Toolkit}, and a
 * {@code ReActAgent} records a fact in Chinese in one conversation and finds it in a new one.
 */
class McpMemoryToolsTest {

    private static final List<String> TOOLS = List.of(
            "add_long_term_memory", "search_long_term_memory", "list_long_term_memories",
            "get_long_term_memory", "update_long_term_memory", "delete_long_term_memory",
            "get_long_term_memory_history", "read_working_memory", "append_working_memory");
    private static final String FACT = "张三对花生过敏，不能吃含花生的菜";

    private static TestServer server;
    private static int mcpPort;

    @BeforeAll
    static void start() throws Exception {
        Path portFile = Files.createTempFile("agentscope-memory-mcp", ".port");
        Files.delete(portFile);
        server = TestServer.start(Map.of(
                "AGENTSCOPE_MEMORY_MCP_PORT", "0",
                "AGENTSCOPE_MEMORY_MCP_PORT_FILE", portFile.toString()));
        // The server writes the MCP port before it reports its gRPC port.
        mcpPort = Integer.parseInt(Files.readString(portFile, StandardCharsets.UTF_8).trim());
        Files.deleteIfExists(portFile);
    }

    @AfterAll
    static void stop() {
        if (server != null) {
            server.close();
        }
    }

    /** A scripted {@link Model} that keeps every tool schema and message it was given. */
    static final class SchemaRecordingModel implements Model {
        private final List<List<ContentBlock>> script;
        final List<List<ToolSchema>> tools = Collections.synchronizedList(new ArrayList<>());
        final List<List<Msg>> calls = Collections.synchronizedList(new ArrayList<>());

        SchemaRecordingModel(List<List<ContentBlock>> script) {
            this.script = script;
        }

        @Override
        public Flux<ChatResponse> stream(List<Msg> messages, List<ToolSchema> offered, GenerateOptions options) {
            int step = calls.size();
            calls.add(new ArrayList<>(messages));
            tools.add(offered == null ? List.of() : new ArrayList<>(offered));
            if (step >= script.size()) {
                return Flux.error(new IllegalStateException("the script has only " + script.size() + " steps"));
            }
            return Flux.just(ChatResponse.builder().id("resp-" + step).content(script.get(step))
                    .usage(new ChatUsage(10, 5, 0.1)).build());
        }

        @Override
        public String getModelName() {
            return "scripted";
        }
    }

    static ToolUseBlock toolUse(String id, String name, Map<String, Object> input, String json) {
        return new ToolUseBlock(id, name, input, json, Map.of());
    }

    /** One conversation: a fresh agent and memory, one user turn; returns the agent's memory. */
    static List<Msg> converse(McpClientWrapper client, SchemaRecordingModel model, String userText) {
        Toolkit toolkit = new Toolkit();
        toolkit.registerMcpClient(client).block(Duration.ofSeconds(30));
        InMemoryMemory memory = new InMemoryMemory();
        ReActAgent agent = ReActAgent.builder().name("助手").sysPrompt("你是一个记得用户偏好的助手。")
                .model(model).toolkit(toolkit).memory(memory).maxIters(4).build();
        agent.call(Msg.builder().role(MsgRole.USER).name("user").textContent(userText).build())
                .block(Duration.ofSeconds(60));
        return memory.getMessages();
    }

    static String toolResultText(List<Msg> memory) {
        for (Msg m : memory) {
            if (m.getRole() == MsgRole.TOOL) {
                ToolResultBlock r = (ToolResultBlock) m.getContent().get(0);
                return r.getOutput().stream().filter(b -> b instanceof TextBlock)
                        .map(b -> ((TextBlock) b).getText()).collect(Collectors.joining("\n"));
            }
        }
        throw new AssertionError("no tool result in " + memory);
    }

    @SuppressWarnings("unchecked")
    static void assertSchemasAsTheModelSeesThem(List<ToolSchema> offered) {
        Map<String, ToolSchema> byName = offered.stream().collect(Collectors.toMap(ToolSchema::getName, t -> t));
        assertTrue(byName.keySet().containsAll(TOOLS), "offered: " + byName.keySet());
        ToolSchema add = byName.get("add_long_term_memory");
        assertTrue(add.getDescription().startsWith("Save facts to long-term memory"));
        Map<String, Object> params = add.getParameters();
        assertEquals("object", params.get("type"));
        assertEquals(List.of("texts"), params.get("required"));
        Map<String, Object> props = (Map<String, Object>) params.get("properties");
        // The user is fixed by the URL / command line: the model is not asked for it.
        assertFalse(props.containsKey("user_id"), "user_id must not be offered: " + props.keySet());
        Map<String, Object> texts = (Map<String, Object>) props.get("texts");
        assertEquals("array", texts.get("type"));
        assertEquals(Map.of("type", "string", "minLength", 1), texts.get("items"));
        Map<String, Object> search = (Map<String, Object>) byName.get("search_long_term_memory").getParameters();
        Map<String, Object> topK = (Map<String, Object>) ((Map<String, Object>) search.get("properties")).get("top_k");
        assertEquals("integer", topK.get("type"));
        assertEquals(50, ((Number) topK.get("maximum")).intValue());
    }

    static McpClientWrapper http(String user) {
        return McpClientBuilder.create("memory")
                .streamableHttpTransport("http://127.0.0.1:" + mcpPort + "/mcp")
                .queryParam("user_id", user)
                .timeout(Duration.ofSeconds(60))
                .buildAsync().block(Duration.ofSeconds(30));
    }

    static McpClientWrapper stdio(String user) {
        String exe = TestServer.repo().resolve(".venv/bin/agentscope-memory").toString();
        return McpClientBuilder.create("memory-stdio")
                .stdioTransport(exe, List.of("mcp", "--target", server.target(), "--user-id", user),
                        Map.of("MEM0_TELEMETRY", "False"))
                .timeout(Duration.ofSeconds(60))
                .initializationTimeout(Duration.ofSeconds(60))
                .buildAsync().block(Duration.ofSeconds(90));
    }

    @Test
    void agentRecordsOverHttpAndRecallsInANewConversationOverHttpAndStdio() {
        String user = "zhang-san";
        McpClientWrapper first = http(user);
        try {
            SchemaRecordingModel recorder = new SchemaRecordingModel(List.of(
                    List.of(toolUse("call_1", "add_long_term_memory", Map.of("texts", List.of(FACT)),
                            "{\"texts\":[\"" + FACT + "\"]}")),
                    List.of(TextBlock.builder().text("好的，我记住了。").build())));
            List<Msg> conversation1 = converse(first, recorder, "请记住：我对花生过敏，不能吃含花生的菜。");
            assertEquals(2, recorder.calls.size());
            assertSchemasAsTheModelSeesThem(recorder.tools.get(0));
            String stored = toolResultText(conversation1);
            assertTrue(stored.contains("\"stored_count\": 1") || stored.contains("\"stored_count\":1"), stored);
            assertTrue(stored.contains(FACT), stored);
        } finally {
            first.close();
        }

        // A new conversation (new agent, new working memory, new MCP session) finds it again.
        for (boolean overStdio : new boolean[] {false, true}) {
            McpClientWrapper client = overStdio ? stdio(user) : http(user);
            try {
                SchemaRecordingModel recaller = new SchemaRecordingModel(List.of(
                        List.of(toolUse("call_9", "search_long_term_memory", Map.of("query", "花生 过敏", "top_k", 3),
                                "{\"query\":\"花生 过敏\",\"top_k\":3}")),
                        List.of(TextBlock.builder().text("您对花生过敏，这道菜不适合您。").build())));
                List<Msg> conversation2 = converse(client, recaller, "这道宫保鸡丁我能吃吗？");
                assertSchemasAsTheModelSeesThem(recaller.tools.get(0));
                String found = toolResultText(conversation2);
                assertTrue(found.contains(FACT), (overStdio ? "stdio: " : "http: ") + found);
                // The model's second call was given the memory through the tool result.
                String lastInput = recaller.calls.get(1).stream().map(MsgTexts::all).collect(Collectors.joining("\n"));
                assertTrue(lastInput.contains(FACT), lastInput);
            } finally {
                client.close();
            }
        }

        // Another user's connection does not see it.
        McpClientWrapper other = http("li-si");
        try {
            SchemaRecordingModel model = new SchemaRecordingModel(List.of(
                    List.of(toolUse("call_5", "search_long_term_memory", Map.of("query", "花生 过敏"),
                            "{\"query\":\"花生 过敏\"}")),
                    List.of(TextBlock.builder().text("我没有相关记录。").build())));
            String found = toolResultText(converse(other, model, "我对什么过敏？"));
            assertFalse(found.contains(FACT), found);
        } finally {
            other.close();
        }
    }

    @Test
    void badArgumentsComeBackAsToolErrorsTheAgentSurvives() {
        McpClientWrapper client = http("wang-wu");
        try {
            SchemaRecordingModel model = new SchemaRecordingModel(List.of(
                    // Out of the schema's range: AgentScope's own validation refuses it.
                    List.of(toolUse("call_1", "search_long_term_memory", Map.of("query", "茶", "top_k", 500),
                            "{\"query\":\"茶\",\"top_k\":500}")),
                    // Valid by the schema, refused by the server: an isError tool result.
                    List.of(toolUse("call_2", "get_long_term_memory", Map.of("memory_id", "no-such-memory"),
                            "{\"memory_id\":\"no-such-memory\"}")),
                    List.of(TextBlock.builder().text("抱歉，我没有找到。").build())));
            List<Msg> memory = converse(client, model, "我喜欢什么茶？");
            assertEquals(3, model.calls.size());
            List<String> results = new ArrayList<>();
            for (Msg m : memory) {
                if (m.getRole() == MsgRole.TOOL) {
                    results.add(MsgTexts.all(m));
                }
            }
            assertEquals(2, results.size(), results.toString());
            assertTrue(results.get(0).contains("maximum value of 50"), results.get(0));
            assertTrue(results.get(1).contains("Not found: long-term memory 'no-such-memory' does not exist"), results.get(1));
        } finally {
            client.close();
        }
    }

    @Test
    void readmeExamplesRegisterTheTools() throws Exception {
        Toolkit overHttp = McpMemoryExample.overHttp("http://127.0.0.1:" + mcpPort + "/mcp", "no-keys-on-this-server");
        Path dataDir = Files.createTempDirectory("agentscope-memory-mcp-example");
        String exe = TestServer.repo().resolve(".venv/bin/agentscope-memory").toString();
        Toolkit overStdio = McpMemoryExample.overStdio(exe, dataDir.toString());
        try {
            for (Toolkit toolkit : List.of(overHttp, overStdio)) {
                assertSchemasAsTheModelSeesThem(toolkit.getToolSchemas());
            }
        } finally {
            overHttp.removeMcpClient("agentscope-memory").block(Duration.ofSeconds(30));
            overStdio.removeMcpClient("agentscope-memory").block(Duration.ofSeconds(30));
        }
    }

    /** The text of every block of a message, tool results included. */
    static final class MsgTexts {
        static String all(Msg m) {
            StringBuilder out = new StringBuilder();
            for (ContentBlock b : m.getContent()) {
                if (b instanceof TextBlock t) {
                    out.append(t.getText()).append('\n');
                } else if (b instanceof ToolResultBlock r) {
                    for (ContentBlock o : r.getOutput()) {
                        if (o instanceof TextBlock t) {
                            out.append(t.getText()).append('\n');
                        }
                    }
                }
            }
            return out.toString();
        }
    }
}
