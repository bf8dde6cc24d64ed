package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.memory.LongTermMemoryMode;
import io.agentscope.core.memory.mem0.Mem0ApiType;
import io.agentscope.core.memory.mem0.Mem0LongTermMemory;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.tool.Toolkit;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * AgentScope's own {@code Mem0LongTermMemory} (agentscope-extensions-mem0, unchanged) against the
 * server's mem0 REST facade, in both of its API types, recording and retrieving through a real
 * {@code ReActAgent} with a scripted model.
 */
class Mem0RestFacadeTest {

    private static final String KEY = "java-mem0-key-0000000001";
    private static final Duration WAIT = Duration.ofSeconds(180);

    private static TestServer server;
    private static String baseUrl;

    @BeforeAll
    static void start() throws Exception {
        Path portFile = Files.createTempFile("mem0-rest", ".port");
        Files.delete(portFile);
        server = TestServer.start(Map.of(
                "AGENTSCOPE_MEMORY_MEM0_REST_PORT", "0",
                "AGENTSCOPE_MEMORY_MEM0_REST_PORT_FILE", portFile.toString(),
                "AGENTSCOPE_MEMORY_API_KEYS", "{\"" + KEY + "\": \"java-tenant\"}"));
        // The REST port is written before the gRPC port the server start waited for.
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

    static Mem0LongTermMemory mem0(Mem0ApiType type, String userId, String key) {
        return Mem0LongTermMemory.builder().agentName("Friday").userId(userId).apiBaseUrl(baseUrl)
                .apiKey(key).apiType(type).timeout(WAIT).metadata(Map.of("category", "travel")).build();
    }

    static ScriptedModel replies(String... texts) {
        return new ScriptedModel(java.util.Arrays.stream(texts)
                .map(t -> List.<ContentBlock>of(TextBlock.builder().text(t).build())).toList());
    }

    static ReActAgent agent(ScriptedModel model, Mem0LongTermMemory ltm) {
        return ReActAgent.builder().name("Friday").sysPrompt("You remember what the user likes.")
                .model(model).toolkit(new Toolkit()).memory(new InMemoryMemory()).maxIters(3)
                .longTermMemory(ltm).longTermMemoryMode(LongTermMemoryMode.STATIC_CONTROL).build();
    }

    @ParameterizedTest
    @EnumSource(Mem0ApiType.class)
    void anAgentRecordsAndLaterRetrieves(Mem0ApiType type) {
        String userId = "alice-" + UUID.randomUUID();
        Mem0LongTermMemory ltm = mem0(type, userId, KEY);

        // First conversation: static control records it after the reply.
        agent(replies("Noted, green tea it is."), ltm).call(user("I like green tea")).block(WAIT);

        // A new agent (fresh short-term memory) is reminded before the model is called.
        ScriptedModel model = replies("You like green tea.");
        agent(model, ltm).call(user("what tea do I like")).block(WAIT);
        String seen = model.calls().get(0).stream().map(Msg::getTextContent)
                .filter(t -> t.contains("green tea")).findFirst().orElse("");
        assertTrue(seen.contains("I like green tea"), "the model was not reminded: " + model.calls().get(0));

        // And directly: the retrieved texts, joined with newlines.
        String found = ltm.retrieve(user("what tea do I like")).block(WAIT);
        assertTrue(found.contains("I like green tea"), found);
        // Metadata set at build time is a filter on search: another category finds nothing.
        Mem0LongTermMemory food = Mem0LongTermMemory.builder().agentName("Friday").userId(userId)
                .apiBaseUrl(baseUrl).apiKey(KEY).apiType(type).timeout(WAIT)
                .metadata(Map.of("category", "food")).build();
        assertEquals("", food.retrieve(user("what tea do I like")).block(WAIT));
        // Another user sees nothing of it.
        assertFalse(mem0(type, "bob-" + UUID.randomUUID(), KEY).retrieve(user("what tea do I like"))
                .block(WAIT).contains("green tea"));
    }

    @ParameterizedTest
    @EnumSource(Mem0ApiType.class)
    void aWrongKeyFailsTheRecordAndRetrievesNothing(Mem0ApiType type) {
        Mem0LongTermMemory wrong = mem0(type, "carol", "not-the-key-000000000000");
        Exception e = assertThrows(Exception.class, () -> wrong.record(List.of(user("secret"))).block(WAIT));
        assertTrue(String.valueOf(e.getMessage()).contains("401") || String.valueOf(e.getMessage()).contains("API key"),
                e.toString());
        // AgentScope's client swallows search errors as "" (that is its behaviour, not ours).
        assertEquals("", wrong.retrieve(user("secret")).block(WAIT));
    }
}
