package dev.agentscopememory.agentscope2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.client.MemoryKind;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.client.internal.WireEnums;
import dev.agentscopememory.grpc.v1.AddMessagesRequest;
import dev.agentscopememory.grpc.v1.ContentBlock;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.GetMessagesRequest;
import dev.agentscopememory.grpc.v1.Role;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.state.JsonFileAgentStateStore;
import io.agentscope.core.util.JsonUtils;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The client core on one classpath with AgentScope-Java 2.x: protobuf, grpc-java (and its
 * shaded Netty) next to 2.x's Jackson, Reactor, OkHttp and Kotlin. A version clash between the two
 * would fail here, in a class loaded or a call made, before any 2.x adapter is written on top.
 */
class CoreBesideAgentScope2Test {

    private static final ObjectMapper TREES = new ObjectMapper();

    @TempDir
    Path stateDir;

    /** 2.x is what the tests see, and 1.x is not there at all (the enforcer also bans it). */
    @Test
    void agentScope2AloneIsOnTheClasspath() throws Exception {
        ClassLoader loader = getClass().getClassLoader();
        assertNotNull(loader.loadClass("io.agentscope.core.state.AgentStateStore"), "2.x's AgentStateStore");
        // Classes of AgentScope-Java 1.x's core and AutoContext extension that 2.0.0 dropped.
        assertNull(loader.getResource("io/agentscope/core/agent/StructuredOutputCapableAgent.class"));
        assertNull(loader.getResource("io/agentscope/core/memory/autocontext/AutoContextMemory.class"));
    }

    /**
     * An AgentScope-Java 2.x message goes to the server through the core's connection and stubs and
     * comes back unchanged into 2.x's own JSON state store.
     */
    @Test
    void aMessageOfAgentScope2TravelsThroughTheCore() throws Exception {
        Msg sent = Msg.builder()
                .id("msg-" + UUID.randomUUID())
                .name("user")
                .role(MsgRole.USER)
                .content(TextBlock.builder().text("Wie wird das Wetter in Zürich? 🌦").build())
                .metadata(Map.of("turn", 3, "ratio", 0.5))
                .timestamp("2026-11-23 10:00:00.000")
                .build();
        // Jackson as 2.x configures it, on the same classpath as protobuf and grpc.
        JsonNode sentJson = TREES.readTree(JsonUtils.getJsonCodec().toJson(sent));

        String memoryId = "agentscope2-" + UUID.randomUUID();
        List<dev.agentscopememory.grpc.v1.Msg> stored;
        try (RemoteConnection connection = RemoteConnection.builder()
                .target(TestServer.shared().target()).build()) {
            CreateMemoryRequest create = CreateMemoryRequest.newBuilder()
                    .setMemoryId(memoryId).setKind(WireEnums.toProto(MemoryKind.IN_MEMORY)).build();
            connection.call("MemoryService/CreateMemory", false, () -> connection.memoryService().createMemory(create));

            AddMessagesRequest add = AddMessagesRequest.newBuilder()
                    .setMemoryId(memoryId)
                    .setRequestId(UUID.randomUUID().toString())
                    .addMessages(dev.agentscopememory.grpc.v1.Msg.newBuilder()
                            .setId(sent.getId())
                            .setName(sent.getName())
                            .setRole(Role.ROLE_USER)
                            .addContent(ContentBlock.newBuilder().setText(
                                    dev.agentscopememory.grpc.v1.TextBlock.newBuilder().setText(sent.getTextContent())))
                            .setMetadataJson(sentJson.get("metadata").toString())
                            .setTimestamp(sent.getTimestamp()))
                    .build();
            connection.call("MemoryService/AddMessages", true, () -> connection.memoryService().addMessages(add));

            GetMessagesRequest get = GetMessagesRequest.newBuilder().setMemoryId(memoryId).build();
            stored = connection.call("MemoryService/GetMessages", true,
                    () -> connection.memoryService().getMessages(get)).getMessagesList();
        }

        assertEquals(1, stored.size());
        dev.agentscopememory.grpc.v1.Msg wire = stored.get(0);
        @SuppressWarnings("unchecked")
        Map<String, Object> metadata = JsonUtils.getJsonCodec().fromJson(wire.getMetadataJson(), Map.class);
        Msg received = Msg.builder()
                .id(wire.getId())
                .name(wire.getName())
                .role(MsgRole.valueOf(wire.getRole().name().substring("ROLE_".length())))
                .content(TextBlock.builder().text(wire.getContent(0).getText().getText()).build())
                .metadata(metadata)
                .timestamp(wire.getTimestamp())
                .build();

        JsonFileAgentStateStore store = new JsonFileAgentStateStore(stateDir);
        store.save("user-42", "session-7", "last_message", received);
        Msg loaded = store.get("user-42", "session-7", "last_message", Msg.class).orElseThrow();
        assertEquals(sentJson, TREES.readTree(JsonUtils.getJsonCodec().toJson(loaded)));
    }
}
