package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.ScriptedLlmServer;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.examples.RemoteMemoryExample;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.model.OpenAIChatModel;
import io.agentscope.core.session.JsonSession;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The README's example, run as a user would: AgentScope's own {@code OpenAIChatModel} over HTTP
 * (to the scripted OpenAI-compatible endpoint), a {@code ReActAgent}, the remote memory on a real
 * server, and the JsonSession it saves loaded into a local {@code InMemoryMemory}.
 */
class ExampleTest {

    @TempDir
    Path sessions;

    @Test
    void aSecondProcessContinuesTheConversation() throws Exception {
        try (ScriptedLlmServer llm = new ScriptedLlmServer("Noted: you like tea.", 12, 5)) {
            OpenAIChatModel model = OpenAIChatModel.builder().baseUrl(llm.baseUrl()).apiKey("scripted")
                    .modelName("scripted").stream(false).build();
            String target = TestServer.shared().target();
            String memoryId = "example-" + UUID.randomUUID();

            Msg first = RemoteMemoryExample.chat(target, memoryId, model, sessions, "I like tea.");
            assertEquals("Noted: you like tea.", first.getTextContent());
            // A new memory object (another process, a restart) continues the same conversation:
            // the model now sees the first turn too.
            RemoteMemoryExample.chat(target, memoryId, model, sessions, "What do I like?");
            List<String> lastPrompt = llm.requests().get(1).path("messages").findValuesAsText("content");
            assertTrue(lastPrompt.contains("I like tea.") && lastPrompt.contains("What do I like?"), lastPrompt.toString());

            InMemoryMemory local = new InMemoryMemory();
            local.loadFrom(new JsonSession(sessions), memoryId);
            List<Msg> remote;
            try (RemoteMemory memory = RemoteMemory.builder().target(target).memoryId(memoryId).build()) {
                remote = memory.getMessages();
            }
            assertEquals(4, remote.size());
            assertEquals(RemoteMemoryTest.json(remote), RemoteMemoryTest.json(local.getMessages()));
        }
    }
}
