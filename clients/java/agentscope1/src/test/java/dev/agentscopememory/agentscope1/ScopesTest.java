package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.client.Visibility;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Parent/child scopes through the 1.x {@link RemoteMemory}: builder options and createChild. */
class ScopesTest {

    private static TestServer server;
    private static RemoteConnection connection;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
        connection = RemoteConnection.builder().target(server.target()).deadline(Duration.ofSeconds(20)).build();
    }

    @AfterAll
    static void stop() {
        connection.close();
    }

    static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    static List<String> texts(List<Msg> messages) {
        List<String> out = new ArrayList<>();
        for (Msg m : messages) {
            out.add(m.getTextContent());
        }
        return out;
    }

    @Test
    void childrenInheritSharedAndGlobalMessagesButNotLocalOnes() {
        String id = "规划者-" + UUID.randomUUID();
        RemoteMemory planner = RemoteMemory.builder().connection(connection).memoryId(id).build();
        planner.addMessage(user("草稿: 只给自己看"));
        RemoteMemory plannerShared = RemoteMemory.builder().connection(connection).memoryId(id)
                .visibility(Visibility.SHARED).build();
        plannerShared.addMessage(user("目标: 比较三家供应商"));

        RemoteMemory researcher = RemoteMemory.createChild(connection, id, id + "/研究员", Visibility.LOCAL);
        researcher.addMessage(user("researcher's own note"));
        assertEquals(List.of("目标: 比较三家供应商"), texts(researcher.getInheritedMessages()));
        // The child's own messages (and its indexes, and its saved state) are its own only.
        assertEquals(List.of("researcher's own note"), texts(researcher.getMessages()));
        assertEquals(List.of("草稿: 只给自己看", "目标: 比较三家供应商"), texts(planner.getMessages()));
        assertEquals(List.of(), planner.getInheritedMessages());

        // A grandchild declared with the builder is attached on first use.
        RemoteMemory writer = RemoteMemory.builder().connection(connection).memoryId(id + "/作者")
                .parentMemoryId(id + "/研究员").build();
        assertEquals(List.of("目标: 比较三家供应商"), texts(writer.getInheritedMessages()));

        assertThrows(RemoteMemoryException.AlreadyExists.class,
                () -> RemoteMemory.createChild(connection, id, id + "/研究员", Visibility.LOCAL));
        assertThrows(RemoteMemoryException.NotFound.class,
                () -> RemoteMemory.createChild(connection, "没有-" + UUID.randomUUID(), "孤儿", Visibility.LOCAL));
        RemoteMemory orphan = RemoteMemory.builder().connection(connection).memoryId("orphan-" + UUID.randomUUID())
                .parentMemoryId("missing-" + UUID.randomUUID()).build();
        assertThrows(RemoteMemoryException.NotFound.class, orphan::getMessages);
    }
}
