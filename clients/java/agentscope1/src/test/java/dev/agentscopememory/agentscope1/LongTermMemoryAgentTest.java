package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.memory.LongTermMemoryMode;
import io.agentscope.core.memory.Memory;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.tool.Toolkit;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** A real ReActAgent with the remote long-term memory in each of AgentScope's three modes. */
class LongTermMemoryAgentTest {

    private static TestServer server;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
    }

    static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    static RemoteLongTermMemory ltm(String userId) {
        return RemoteLongTermMemory.builder().target(server.target()).agentName("Assistant").userId(userId)
                .deadline(Duration.ofSeconds(120)).build();
    }

    static ReActAgent agent(Memory memory, ScriptedModel model, RemoteLongTermMemory ltm, LongTermMemoryMode mode) {
        return ReActAgent.builder().name("Assistant").sysPrompt("You remember things.")
                .model(model).toolkit(new Toolkit()).memory(memory).maxIters(5)
                .longTermMemory(ltm).longTermMemoryMode(mode).build();
    }

    static ToolUseBlock toolUse(String id, String name, String argsJson, Map<String, Object> input) {
        return new ToolUseBlock(id, name, input, argsJson, Map.of());
    }

    static String resultText(Msg toolMsg) {
        ToolResultBlock r = (ToolResultBlock) toolMsg.getContent().get(0);
        return ((TextBlock) r.getOutput().get(0)).getText();
    }

    static boolean isInjection(Msg m) {
        return m.getRole() != MsgRole.TOOL && m.getTextContent().contains("<long_term_memory>");
    }

    @Test
    void builderNeedsAScope() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> RemoteLongTermMemory.builder().target("127.0.0.1:1").build());
        assertTrue(e.getMessage().contains("agentName"), e.getMessage());
    }

    /**
     * A metadata value AgentScope 1.x's codec (Jackson) cannot write failed build() with the codec's
     * own JsonException, "Failed to serialize object to JSON", naming neither the key nor why; now
     * the IllegalArgumentException says where in the metadata and what Jackson said, as in 2.x.
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
                () -> RemoteLongTermMemory.builder().target("127.0.0.1:1").agentName("助手")
                        .metadata(Map.of("环", loop)).build());
        assertTrue(selfHolding.getMessage().startsWith("metadata[\"环\"]...: a java.util.HashMap cannot be written as"
                + " JSON by AgentScope's codec (Document nesting depth (1001) exceeds"), selfHolding.getMessage());
        // What it can write still builds, with nothing sent yet.
        given.put("来源", List.of("频道", 3, Map.of("深", true)));
        RemoteLongTermMemory.builder().target("127.0.0.1:1").userId("u").metadata(given).build().close();
    }

    @Test
    void emptyInputsMakeNoCall() {
        // A target nobody listens on: any call would fail, so these prove no call is made.
        try (RemoteLongTermMemory unreachable = RemoteLongTermMemory.builder().target("127.0.0.1:1")
                .userId("u").maxAttempts(1).build()) {
            assertEquals("", unreachable.retrieve(null).block());
            assertEquals("", unreachable.retrieve(Msg.builder().role(MsgRole.USER).content(List.of()).build()).block());
            unreachable.record(List.of()).block();
            java.util.ArrayList<Msg> nulls = new java.util.ArrayList<>();
            nulls.add(null);
            unreachable.record(nulls).block();
            RemoteMemoryException e = assertThrows(RemoteMemoryException.class,
                    () -> unreachable.retrieve(user("anything")).block());
            assertTrue(e instanceof RemoteMemoryException.Unavailable, e.toString());
        }
    }

    @Test
    void recordThenRetrieve() {
        try (RemoteLongTermMemory memory = ltm("u-" + UUID.randomUUID())) {
            memory.record(List.of(user("I am allergic to peanuts."),
                    Msg.builder().role(MsgRole.ASSISTANT).name("Assistant").textContent("Noted.").build()))
                    .block(Duration.ofSeconds(120));
            String found = memory.retrieve(user("peanuts allergy")).block(Duration.ofSeconds(120));
            assertTrue(found.contains("peanuts"), found);
            // another user's scope sees nothing of it
            try (RemoteLongTermMemory other = ltm("u-" + UUID.randomUUID())) {
                assertFalse(other.retrieve(user("peanuts allergy")).block(Duration.ofSeconds(120)).contains("peanuts"));
            }
        }
    }

    @Test
    void recordSendsTheTextsNotTheImages() {
        // The server records text only (as Mem0LongTermMemory does), but the whole messages went:
        // a conversation holding images past the server's 64 MiB receive limit could never be
        // recorded again (RESOURCE_EXHAUSTED), since STATIC_CONTROL sends the whole memory.
        String data = "A".repeat(6 * 1024 * 1024);
        List<Msg> conversation = new java.util.ArrayList<>();
        conversation.add(user("I drink genmaicha every morning."));
        for (int i = 0; i < 12; i++) {
            conversation.add(Msg.builder().role(MsgRole.USER).content(TextBlock.builder().text("photo " + i).build(),
                    io.agentscope.core.message.ImageBlock.builder().source(io.agentscope.core.message.Base64Source
                            .builder().mediaType("image/png").data(data).build()).build()).build());
        }
        try (RemoteLongTermMemory memory = ltm("u-" + UUID.randomUUID())) {
            memory.record(conversation).block(Duration.ofSeconds(120));
            String found = memory.retrieve(user("genmaicha morning")).block(Duration.ofSeconds(120));
            assertTrue(found.contains("genmaicha"), found);
        }
    }

    @Test
    void staticControlKeepsRecordingAConversationOfMoreThanAThousandMessages() {
        // STATIC_CONTROL records the whole memory after every call, and the server takes at most
        // 1,000 messages a call: past them every record failed, and AgentScope's hook only logs.
        String userId = "u-" + UUID.randomUUID();
        try (RemoteLongTermMemory ltm = ltm(userId);
                RemoteMemory memory = RemoteMemory.builder().target(server.target())
                        .memoryId("ltm-long-" + UUID.randomUUID()).build()) {
            List<Msg> earlier = new java.util.ArrayList<>();
            for (int i = 0; i < 550; i++) {
                earlier.add(user("question " + i));
                earlier.add(Msg.builder().role(MsgRole.ASSISTANT).name("Assistant").textContent("answer " + i).build());
            }
            memory.addMessages(earlier);
            ScriptedModel model = new ScriptedModel(List.of(
                    List.<ContentBlock>of(TextBlock.builder().text("Genmaicha it is.").build())));
            agent(memory, model, ltm, LongTermMemoryMode.STATIC_CONTROL)
                    .call(user("My favourite tea is genmaicha.")).block(Duration.ofSeconds(180));
            String found = ltm.retrieve(user("favourite tea genmaicha")).block(Duration.ofSeconds(120));
            assertTrue(found.contains("genmaicha"), found);
        }
    }

    @Test
    void staticControlInjectsAndRecords() {
        String userId = "u-" + UUID.randomUUID();
        try (RemoteLongTermMemory ltm = ltm(userId);
                RemoteMemory memory = RemoteMemory.builder().target(server.target())
                        .memoryId("ltm-static-" + UUID.randomUUID()).build()) {
            ltm.record(List.of(user("My favourite city is Kyoto."))).block(Duration.ofSeconds(120));
            ScriptedModel model = new ScriptedModel(List.of(
                    List.<ContentBlock>of(TextBlock.builder().text("You like Kyoto best.").build())));
            agent(memory, model, ltm, LongTermMemoryMode.STATIC_CONTROL)
                    .call(user("Which city is my favourite?")).block(Duration.ofSeconds(180));

            // No memory tools in STATIC_CONTROL.
            assertFalse(model.toolNames().get(0).contains("recordToMemory"));
            // Retrieved before the call and injected after the user's message; persisted.
            List<Msg> stored = memory.getMessages();
            assertEquals(3, stored.size(), stored.toString());
            assertEquals("Which city is my favourite?", stored.get(0).getTextContent());
            assertTrue(isInjection(stored.get(1)), stored.get(1).getTextContent());
            assertTrue(stored.get(1).getTextContent().contains("Kyoto"), stored.get(1).getTextContent());
            assertTrue(model.calls().get(0).stream().anyMatch(LongTermMemoryAgentTest::isInjection),
                    "the model saw the retrieved memory");
            // Recorded after the call: the conversation is now retrievable.
            String found = ltm.retrieve(user("Which city is my favourite?")).block(Duration.ofSeconds(120));
            assertTrue(found.contains("Which city is my favourite?") || found.contains("You like Kyoto best."), found);
        }
    }

    @Test
    void agentControlUsesTheTools() {
        String userId = "u-" + UUID.randomUUID();
        try (RemoteLongTermMemory ltm = ltm(userId);
                RemoteMemory memory = RemoteMemory.builder().target(server.target())
                        .memoryId("ltm-agent-" + UUID.randomUUID()).build()) {
            ScriptedModel model = new ScriptedModel(List.of(
                    List.<ContentBlock>of(toolUse("c1", "recordToMemory",
                            "{\"thinking\":\"an allergy matters\",\"content\":[\"User is allergic to peanuts\"]}",
                            Map.of("thinking", "an allergy matters", "content", List.of("User is allergic to peanuts")))),
                    List.<ContentBlock>of(TextBlock.builder().text("Noted.").build()),
                    List.<ContentBlock>of(toolUse("c2", "retrieveFromMemory",
                            "{\"keywords\":[\"allergic\",\"peanuts\"]}",
                            Map.of("keywords", List.of("allergic", "peanuts")))),
                    List.<ContentBlock>of(TextBlock.builder().text("You are allergic to peanuts.").build())));
            ReActAgent agent = agent(memory, model, ltm, LongTermMemoryMode.AGENT_CONTROL);
            agent.call(user("Remember: I am allergic to peanuts.")).block(Duration.ofSeconds(180));
            agent.call(user("What am I allergic to?")).block(Duration.ofSeconds(180));

            assertTrue(model.toolNames().get(0).containsAll(List.of("recordToMemory", "retrieveFromMemory")),
                    model.toolNames().get(0).toString());
            List<Msg> stored = memory.getMessages();
            assertFalse(stored.stream().anyMatch(LongTermMemoryAgentTest::isInjection), "no static injection");
            assertEquals("\"Successfully recorded to long-term memory\"", resultText(stored.get(2)));
            String retrieved = resultText(stored.get(6));
            assertTrue(retrieved.contains("<long_term_memory>") && retrieved.contains("peanuts"), retrieved);
        }
    }

    @Test
    void bothModesTogether() {
        String userId = "u-" + UUID.randomUUID();
        try (RemoteLongTermMemory ltm = ltm(userId);
                RemoteMemory memory = RemoteMemory.builder().target(server.target())
                        .memoryId("ltm-both-" + UUID.randomUUID()).build()) {
            ltm.record(List.of(user("I work as a lighthouse keeper."))).block(Duration.ofSeconds(120));
            ScriptedModel model = new ScriptedModel(List.of(
                    List.<ContentBlock>of(TextBlock.builder().text("You keep a lighthouse.").build())));
            agent(memory, model, ltm, LongTermMemoryMode.BOTH).call(user("What is my job as a keeper?"))
                    .block(Duration.ofSeconds(180));
            assertTrue(model.toolNames().get(0).containsAll(List.of("recordToMemory", "retrieveFromMemory")));
            List<Msg> stored = memory.getMessages();
            assertTrue(isInjection(stored.get(1)) && stored.get(1).getTextContent().contains("lighthouse"),
                    stored.get(1).getTextContent());
        }
    }
}
