package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.memory.Memory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.session.JsonSession;
import io.agentscope.core.state.SimpleSessionKey;
import io.agentscope.core.tool.Toolkit;
import io.agentscope.core.util.JsonUtils;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Sessions saved from a remote memory load into InMemoryMemory and back, with the real JsonSession. */
class JsonSessionCrossLoadTest {

    private static final ObjectMapper TREES = new ObjectMapper();
    private static TestServer server;
    private static RemoteConnection connection;

    @TempDir
    Path dir;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
        connection = RemoteConnection.builder().target(server.target()).build();
    }

    @AfterAll
    static void stop() {
        connection.close();
    }

    static RemoteMemory fresh() {
        return RemoteMemory.builder().connection(connection).memoryId("s-" + UUID.randomUUID()).build();
    }

    static JsonNode json(List<Msg> msgs) throws Exception {
        return TREES.readTree(JsonUtils.getJsonCodec().toJson(msgs));
    }

    static List<JsonNode> lines(Path file) throws Exception {
        List<JsonNode> out = new ArrayList<>();
        for (String line : Files.readAllLines(file)) {
            if (!line.isBlank()) {
                out.add(TREES.readTree(line));
            }
        }
        return out;
    }

    @Test
    void remoteToLocalAndBack() throws Exception {
        List<Msg> originals = new ArrayList<>(SampleMessages.all().values());
        JsonSession session = new JsonSession(dir);

        RemoteMemory remote = fresh();
        remote.addMessages(originals);
        remote.saveTo(session, "user_1");

        // The same files InMemoryMemory writes for the same messages.
        Path jsonl = dir.resolve("user_1").resolve("memory_messages.jsonl");
        assertTrue(Files.exists(jsonl));
        InMemoryMemory reference = new InMemoryMemory();
        originals.forEach(reference::addMessage);
        JsonSession referenceSession = new JsonSession(dir.resolve("reference"));
        reference.saveTo(referenceSession, "user_1");
        assertEquals(lines(dir.resolve("reference/user_1/memory_messages.jsonl")), lines(jsonl));

        InMemoryMemory local = new InMemoryMemory();
        local.addMessage(Msg.builder().role(MsgRole.USER).textContent("replaced by load").build());
        local.loadFrom(session, "user_1");
        assertEquals(json(originals), json(local.getMessages()));

        // and back into another remote memory, replacing what it held
        local.addMessage(Msg.builder().id("extra").role(MsgRole.USER).textContent("added locally").timestamp("T").build());
        local.saveTo(session, "user_1");
        RemoteMemory other = fresh();
        other.addMessage(Msg.builder().role(MsgRole.USER).textContent("replaced by load").build());
        other.loadFrom(session, "user_1");
        assertEquals(json(local.getMessages()), json(other.getMessages()));
        assertEquals(originals.size() + 1, other.getMessages().size());
    }

    @Test
    void incrementalSavesAndEmptyMemory() throws Exception {
        JsonSession session = new JsonSession(dir);
        RemoteMemory remote = fresh();
        remote.saveTo(session, "s");
        InMemoryMemory local = new InMemoryMemory();
        local.loadFrom(session, "s");
        assertEquals(List.of(), local.getMessages());
        assertTrue(session.exists(SimpleSessionKey.of("s")), "an empty memory still creates the session");

        for (int i = 0; i < 3; i++) {
            remote.addMessage(Msg.builder().role(MsgRole.USER).textContent("m" + i).build());
            remote.saveTo(session, "s");
        }
        local.loadFrom(session, "s");
        assertEquals(json(remote.getMessages()), json(local.getMessages()));
        assertEquals(3, lines(dir.resolve("s/memory_messages.jsonl")).size());

        // A shrunk memory is saved shrunk.
        remote.deleteMessage(0);
        remote.saveTo(session, "s");
        local.loadFrom(session, "s");
        assertEquals(List.of("m1", "m2"), local.getMessages().stream().map(Msg::getTextContent).toList());
    }

    @Test
    void missingSessionEmptiesAndLoadIfExistsKeeps() {
        JsonSession session = new JsonSession(dir);
        RemoteMemory remote = fresh();
        remote.addMessage(Msg.builder().role(MsgRole.USER).textContent("kept").build());
        assertFalse(remote.loadIfExists(session, "nobody"));
        assertEquals(1, remote.getMessages().size());
        remote.loadFrom(session, "nobody");
        assertEquals(List.of(), remote.getMessages());
    }

    @Test
    void failedLoadLeavesTheMemoryAsItWas() {
        JsonSession session = new JsonSession(dir);
        InMemoryMemory local = new InMemoryMemory();
        local.addMessage(Msg.builder().role(MsgRole.USER).textContent("fine").build());
        // Over the server's per-message limit (4 MiB by default).
        local.addMessage(Msg.builder().role(MsgRole.USER).textContent("x".repeat(5 * 1024 * 1024)).build());
        local.saveTo(session, "big");

        RemoteMemory remote = fresh();
        remote.addMessage(Msg.builder().role(MsgRole.USER).textContent("before").build());
        RemoteMemoryException e = org.junit.jupiter.api.Assertions.assertThrows(
                RemoteMemoryException.class, () -> remote.loadFrom(session, "big"));
        assertTrue(e.getServerMessage().contains("memory_messages"), e.getMessage());
        assertEquals(List.of("before"), remote.getMessages().stream().map(Msg::getTextContent).toList());
    }

    /**
     * A session file holding an escape of half a surrogate pair ({@code "\ud800"}, which a writer
     * other than AgentScope may put there): AgentScope's JsonSession reads it into half a
     * character, and cannot write it back. The server cannot store it either: the load is refused,
     * naming where it is, and the memory keeps what it held (it used to store {@code '?'}).
     */
    @Test
    void aLoneSurrogateInASessionFileIsRefusedNotStoredAsAQuestionMark() throws Exception {
        Path conv = Files.createDirectories(dir.resolve("conv"));
        Files.writeString(conv.resolve("memory_messages.jsonl"),
                "{\"id\":\"a\",\"name\":null,\"role\":\"USER\",\"content\":[{\"type\":\"text\",\"text\":\"好\"}],"
                        + "\"metadata\":{},\"timestamp\":\"T\"}\n"
                        + "{\"id\":\"b\",\"name\":null,\"role\":\"USER\",\"content\":[{\"type\":\"text\",\"text\":\"x\\ud800y\"}],"
                        + "\"metadata\":{},\"timestamp\":\"T\"}\n");
        JsonSession session = new JsonSession(dir);

        // What AgentScope itself does with the file.
        InMemoryMemory local = new InMemoryMemory();
        local.loadFrom(session, "conv");
        assertEquals("x\ud800y", local.getMessages().get(1).getTextContent());
        org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class,
                () -> local.saveTo(new JsonSession(dir.resolve("copy")), "conv"));

        RemoteMemory remote = fresh();
        remote.addMessage(Msg.builder().role(MsgRole.USER).textContent("before").build());
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(
                IllegalArgumentException.class, () -> remote.loadFrom(session, "conv"));
        assertEquals("memory_messages[1].content[0].text: contains a lone surrogate at character 1; "
                + "it is not Unicode text and cannot be stored", e.getMessage());
        RemoteMemory reader = fresh(remote.getMemoryId());
        assertEquals(List.of("before"), reader.getMessages().stream().map(Msg::getTextContent).toList());

        // The same for an AutoContext memory's session keys.
        Files.move(conv.resolve("memory_messages.jsonl"), conv.resolve("autoContextMemory_workingMessages.jsonl"));
        try (RemoteAutoContextMemory auto = RemoteAutoContextMemory.builder().connection(connection)
                .memoryId("s-" + UUID.randomUUID()).build()) {
            e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> auto.loadFrom(session, "conv"));
            assertTrue(e.getMessage().startsWith(
                    "autoContextMemory_workingMessages[1].content[0].text: contains a lone surrogate"), e.getMessage());
            assertEquals(List.of(), auto.getMessages());
        }
    }

    static RemoteMemory fresh(String memoryId) {
        return RemoteMemory.builder().connection(connection).memoryId(memoryId).build();
    }

    static ReActAgent agent(Memory memory, ScriptedModel model) {
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(new WeatherTools());
        return ReActAgent.builder().name("Assistant").sysPrompt("sys").model(model)
                .toolkit(toolkit).memory(memory).maxIters(6).build();
    }

    @Test
    void agentSessionMovesBetweenRemoteAndLocal() throws Exception {
        List<List<io.agentscope.core.message.ContentBlock>> script = AgentScripts.weatherTurns();
        JsonSession session = new JsonSession(dir);

        // Turn 1 on a remote memory, saved through the agent.
        RemoteMemory remote = fresh();
        ReActAgent first = agent(remote, new ScriptedModel(script.subList(0, 3)));
        first.call(Msg.builder().role(MsgRole.USER).name("user").textContent("Paris and Berlin?").build())
                .block(Duration.ofSeconds(60));
        first.saveTo(session, "conv");
        assertTrue(Files.exists(dir.resolve("conv/agent_meta.json")));

        // Turn 2 on a local memory loaded from that session.
        InMemoryMemory local = new InMemoryMemory();
        ReActAgent second = agent(local, new ScriptedModel(script.subList(3, 5)));
        second.loadFrom(session, "conv");
        assertEquals(json(remote.getMessages()), json(local.getMessages()));
        second.call(Msg.builder().role(MsgRole.USER).name("user").textContent("And Rome?").build())
                .block(Duration.ofSeconds(60));
        second.saveTo(session, "conv");

        // Back to a remote memory.
        RemoteMemory again = fresh();
        ReActAgent third = agent(again, new ScriptedModel(List.of()));
        third.loadFrom(session, "conv");
        assertEquals(json(local.getMessages()), json(again.getMessages()));
        assertEquals(11, again.getMessages().size());
    }
}
