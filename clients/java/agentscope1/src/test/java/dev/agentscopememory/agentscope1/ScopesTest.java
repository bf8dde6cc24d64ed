package dev.agentscopememory.agentscope1;

import static dev.agentscopememory.agentscope1.SampleMessages.texts;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.client.Visibility;
import io.agentscope.core.message.Msg;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.TextBlock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
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
        // The child's model sees the inherited message first; its own come after, and only its
        // own can be deleted or are saved.
        assertEquals(List.of("目标: 比较三家供应商", "researcher's own note"), texts(researcher.getMessages()));
        assertEquals(List.of("researcher's own note"), texts(researcher.ownMessages()));
        researcher.deleteMessage(0);
        assertEquals(2, researcher.getMessages().size());
        io.agentscope.core.session.InMemorySession session = new io.agentscope.core.session.InMemorySession();
        io.agentscope.core.state.SessionKey key = io.agentscope.core.state.SimpleSessionKey.of("s-" + UUID.randomUUID());
        researcher.saveTo(session, key);
        assertEquals(List.of("researcher's own note"),
                texts(session.getList(key, RemoteMemory.MESSAGES_KEY, Msg.class)));
        researcher.deleteMessage(1);
        assertEquals(List.of("目标: 比较三家供应商"), texts(researcher.getMessages()));
        researcher.addMessage(user("researcher's own note"));
        // A user's input does not wait for its confirmation (AddConfirmation.MODEL_OUTPUT): other
        // clients see it once it is stored, which flush() waits for.
        researcher.flush();
        RemoteMemory plainView = RemoteMemory.builder().connection(connection).memoryId(id + "/研究员").build();
        assertEquals(List.of("researcher's own note"), texts(plainView.getMessages()));
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

    /**
     * AgentScope's deleteMessage(i) deletes index i of the list getMessages returned. A parent
     * that shares (or deletes) a message between a child's read and its delete must not move
     * the delete onto another of the child's own messages.
     */
    @Test
    void aDeleteRefersToTheListTheChildLastReadWhateverItsParentSharedSince() {
        String id = "父-" + UUID.randomUUID();
        RemoteMemory parent = RemoteMemory.builder().connection(connection).memoryId(id)
                .visibility(Visibility.SHARED).build();
        parent.addMessage(user("shared 1"));
        parent.flush();
        RemoteMemory child = RemoteMemory.createChild(connection, id, id + "/子", Visibility.LOCAL);
        child.addMessages(List.of(user("own a"), user("own b"), user("own c")));
        assertEquals(List.of("shared 1", "own a", "own b", "own c"), texts(child.getMessages()));

        parent.addMessage(user("shared 2"));
        parent.flush();
        child.deleteMessage(2); // "own b" in the list the child holds
        assertEquals(List.of("own a", "own c"), texts(child.ownMessages()));
        child.deleteMessage(0); // inherited: read-only
        assertEquals(List.of("own a", "own c"), texts(child.ownMessages()));

        assertEquals(List.of("shared 1", "shared 2", "own a", "own c"), texts(child.getMessages()));
        parent.deleteMessage(0); // "shared 1" leaves the child's inherited messages
        child.deleteMessage(3); // "own c" in the list the child holds
        assertEquals(List.of("own a"), texts(child.ownMessages()));
        child.deleteMessage(1); // "shared 2": read-only
        assertEquals(List.of("shared 2", "own a"), texts(child.getMessages()));

        // Before any read, an index counts the inherited messages there are now.
        RemoteMemory fresh = RemoteMemory.builder().connection(connection).memoryId(id + "/子")
                .includeInherited(true).build();
        fresh.deleteMessage(1);
        assertEquals(List.of("shared 2"), texts(child.getMessages()));
    }

    /** A parent named for a memory that must already exist (createIfMissing false) is set all the same. */
    @Test
    void anExistingMemoryIsAttachedToTheParentItsBuilderNames() {
        String id = "已有-" + UUID.randomUUID();
        RemoteMemory parent = RemoteMemory.builder().connection(connection).memoryId(id)
                .visibility(Visibility.SHARED).build();
        parent.addMessage(user("shared"));
        parent.flush();
        RemoteMemory existing = RemoteMemory.builder().connection(connection).memoryId(id + "/旧").build();
        existing.addMessage(user("old note"));
        existing.flush();

        RemoteMemory child = RemoteMemory.builder().connection(connection).memoryId(id + "/旧")
                .createIfMissing(false).parentMemoryId(id).build();
        assertEquals(List.of("shared", "old note"), texts(child.getMessages()));
        // Still never created: a missing memory is NOT_FOUND, not attached.
        RemoteMemory missing = RemoteMemory.builder().connection(connection).memoryId(id + "/无")
                .createIfMissing(false).parentMemoryId(id).build();
        assertThrows(RemoteMemoryException.NotFound.class, missing::getMessages);
        assertThrows(RemoteMemoryException.NotFound.class, missing::getMessages);
    }

    /** messageCount() counts what getMessages() returns, so its last index is the last message. */
    @Test
    void aChildsMessageCountIsTheSizeOfItsMessagesAndItsLastIndexTheLastMessage() {
        String id = "计数-" + UUID.randomUUID();
        RemoteMemory parent = RemoteMemory.builder().connection(connection).memoryId(id)
                .visibility(Visibility.SHARED).build();
        parent.addMessage(user("shared 1"));
        parent.flush();
        RemoteMemory child = RemoteMemory.createChild(connection, id, id + "/子", Visibility.LOCAL);
        child.addMessages(List.of(user("own a"), user("own b")));
        assertEquals(child.getMessages().size(), child.messageCount());
        parent.addMessage(user("shared 2"));
        parent.flush();
        assertEquals(4, child.messageCount());
        child.deleteMessage((int) child.messageCount() - 1);
        assertEquals(List.of("shared 1", "shared 2", "own a"), texts(child.getMessages()));
    }

    /**
     * A memory built with a parent starts as the plain memory does, with the watch that creates
     * it (no CreateMemory, and no GetMessages for a new conversation), and is attached to its
     * parent before its first read returns.
     */
    @Test
    void aChildsFirstReadCreatesItOverTheWatchAndAttachesItFirst() throws Exception {
        String id = "首-" + UUID.randomUUID();
        RemoteMemory parent = RemoteMemory.builder().connection(connection).memoryId(id)
                .visibility(Visibility.SHARED).build();
        parent.addMessage(user("the plan"));
        parent.flush();
        Map<String, AtomicInteger> calls = new java.util.TreeMap<>();
        for (String method : List.of("CreateMemory", "SetParent", "WatchMessages", "GetMessages", "ListInheritedMessages")) {
            calls.put(method, new AtomicInteger());
        }
        ManagedChannel channel = Grpc.newChannelBuilder(server.target(), InsecureChannelCredentials.create()).build();
        try (RemoteMemory child = RemoteMemory.builder().channel(CountedCalls.on(channel, calls))
                .memoryId(id + "/子").parentMemoryId(id).build()) {
            assertEquals(List.of("the plan"), texts(child.getMessages()));
            assertEquals("{CreateMemory=0, GetMessages=0, ListInheritedMessages=1, SetParent=1, WatchMessages=1}",
                    calls.toString());
            child.addMessage(user("mine"));
            assertEquals(List.of("the plan", "mine"), texts(child.getMessages()));
        } finally {
            channel.shutdownNow();
        }
        RemoteMemory other = RemoteMemory.builder().connection(connection).memoryId(id + "/子").build();
        assertEquals(List.of("the plan"), texts(other.getInheritedMessages()));
    }

    @Test
    void aSubAgentsModelSeesWhatItsParentShared() {
        String id = "lead-" + UUID.randomUUID();
        RemoteMemory lead = RemoteMemory.builder().connection(connection).memoryId(id)
                .visibility(Visibility.SHARED).build();
        lead.addMessage(user("The customer is Acme; budget 5000 EUR."));
        RemoteMemory privateNotes = RemoteMemory.builder().connection(connection).memoryId(id).build();
        privateNotes.addMessage(user("lead's private scratch"));

        List<List<ContentBlock>> script = List.of(List.of(TextBlock.builder().text("Acme, 5000 EUR").build()));
        ScriptedModel model = new ScriptedModel(script);
        RemoteMemory memory = RemoteMemory.createChild(connection, id, id + "/helper", Visibility.LOCAL);
        ReActAgent helper = ReActAgent.builder().name("Helper").sysPrompt("You help.").model(model)
                .memory(memory).maxIters(2).build();
        helper.call(user("Who is the customer?")).block(Duration.ofSeconds(60));

        List<String> seen = texts(model.calls().get(0));
        assertEquals(true, seen.contains("The customer is Acme; budget 5000 EUR."), seen.toString());
        assertEquals(false, seen.contains("lead's private scratch"), seen.toString());
        // The helper's own history holds its turn only; the lead's memory is unchanged.
        assertEquals(List.of("Who is the customer?", "Acme, 5000 EUR"), texts(memory.ownMessages()));
        assertEquals(List.of("The customer is Acme; budget 5000 EUR.", "lead's private scratch"), texts(lead.getMessages()));
    }
}
