package dev.agentscopememory.agentscope2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.RuntimeContext;
import io.agentscope.core.memory.LongTermMemoryMode;
import io.agentscope.core.memory.mem0.Mem0ApiType;
import io.agentscope.core.memory.mem0.Mem0LongTermMemory;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.model.ChatResponse;
import io.agentscope.core.model.ChatUsage;
import io.agentscope.core.model.GenerateOptions;
import io.agentscope.core.model.Model;
import io.agentscope.core.model.ToolSchema;
import io.agentscope.core.tool.Toolkit;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import reactor.core.publisher.Flux;

/**
 * AgentScope's own {@code Mem0LongTermMemory} (agentscope-extensions-mem0 1.0.9, unchanged) on
 * agentscope-core 2.0.0, against the server's mem0 REST facade in both API types, through a
 * real 2.x {@code ReActAgent} with a scripted model.
 */
class Mem0RestFacadeTest {

    private static final String KEY = "java2-mem0-key-000000001";
    private static final Duration WAIT = Duration.ofSeconds(180);

    private static TestServer server;
    private static String baseUrl;

    /** Answers each call with the next text and remembers what it was shown. */
    static final class Replies implements Model {
        private final List<String> texts;
        final List<List<Msg>> calls = Collections.synchronizedList(new ArrayList<>());

        Replies(String... texts) {
            this.texts = List.of(texts);
        }

        @Override
        public Flux<ChatResponse> stream(List<Msg> messages, List<ToolSchema> tools, GenerateOptions options) {
            int step = calls.size();
            calls.add(new ArrayList<>(messages));
            if (step >= texts.size()) {
                return Flux.error(new IllegalStateException("the script has only " + texts.size() + " replies"));
            }
            return Flux.just(ChatResponse.builder().id("resp-" + UUID.randomUUID())
                    .content(List.<ContentBlock>of(TextBlock.builder().text(texts.get(step)).build()))
                    .usage(new ChatUsage(10, 5, 0.1)).build());
        }

        @Override
        public String getModelName() {
            return "scripted";
        }
    }

    @BeforeAll
    static void start() throws Exception {
        Path portFile = Files.createTempFile("mem0-rest", ".port");
        Files.delete(portFile);
        server = TestServer.start(Map.of(
                "AGENTSCOPE_MEMORY_MEM0_REST_PORT", "0",
                "AGENTSCOPE_MEMORY_MEM0_REST_PORT_FILE", portFile.toString(),
                "AGENTSCOPE_MEMORY_API_KEYS", "{\"" + KEY + "\": \"java2-tenant\"}"));
        baseUrl = "http://127.0.0.1:" + Files.readString(portFile, StandardCharsets.UTF_8).trim();
        Files.deleteIfExists(portFile);
    }

    @AfterAll
    static void stop() {
        if (server != null) {
            server.close();
        }
    }

    static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    @SuppressWarnings("deprecation") // longTermMemory(..) is deprecated on 2.x but still wired
    static ReActAgent agent(Replies model, Mem0LongTermMemory ltm) {
        return ReActAgent.builder().name("Friday").sysPrompt("You remember what the user likes.")
                .model(model).toolkit(new Toolkit()).maxIters(3)
                .longTermMemory(ltm).longTermMemoryMode(LongTermMemoryMode.STATIC_CONTROL)
                // 2.x records in the background by default; the next turn must find the record.
                .longTermMemoryAsyncRecord(false).build();
    }

    @ParameterizedTest
    @EnumSource(Mem0ApiType.class)
    void anAgentRecordsAndLaterRetrieves(Mem0ApiType type) {
        String userId = "alice-" + UUID.randomUUID();
        Mem0LongTermMemory ltm = Mem0LongTermMemory.builder().agentName("Friday").userId(userId)
                .apiBaseUrl(baseUrl).apiKey(KEY).apiType(type).timeout(WAIT)
                .metadata(Map.of("category", "travel")).build();
        // On 2.0.0 the static hook records the hook's own Memory, which a 2.x agent no longer
        // fills (its conversation lives in AgentState), so the conversation is recorded through
        // the client directly; the agent then retrieves through the hook.
        ltm.record(List.of(user("I like green tea"), Msg.builder().role(MsgRole.ASSISTANT).name("Friday")
                .textContent("Noted, green tea it is.").build())).block(WAIT);
        String recorded = ltm.retrieve(user("what tea do I like")).block(WAIT);
        assertTrue(recorded.contains("I like green tea"), "not recorded: " + recorded);

        Replies model = new Replies("You like green tea.");
        RuntimeContext second = RuntimeContext.builder().userId(userId).sessionId("s2").build();
        agent(model, ltm).call(List.of(user("what tea do I like")), second).block(WAIT);
        // On 2.0.0 the retrieved memories reach the model as a USER message named long_term_memory.
        Msg reminder = model.calls.get(0).stream().filter(m -> "long_term_memory".equals(m.getName()))
                .findFirst().orElseThrow(() -> new AssertionError("not reminded: " + model.calls.get(0).stream()
                        .map(m -> m.getName() + ": " + m.getTextContent()).toList()));
        assertTrue(reminder.getTextContent().contains("I like green tea"), reminder.getTextContent());
        assertEquals("", Mem0LongTermMemory.builder().agentName("Friday").userId("nobody-" + UUID.randomUUID())
                .apiBaseUrl(baseUrl).apiKey(KEY).apiType(type).timeout(WAIT).build()
                .retrieve(user("what tea do I like")).block(WAIT));
    }
}
