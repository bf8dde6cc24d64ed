package dev.agentscopememory.agentscope1;

import static dev.agentscopememory.agentscope1.SampleMessages.texts;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.agentscope1.internal.MsgConverter;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.DeleteMemoryRequest;
import dev.agentscopememory.grpc.v1.GetMessagesResponse;
import dev.agentscopememory.grpc.v1.MemoryServiceGrpc;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.session.InMemorySession;
import io.agentscope.core.state.SessionKey;
import io.agentscope.core.state.SimpleSessionKey;
import io.agentscope.core.util.JsonUtils;
import io.grpc.Channel;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * getMessages sends the etag of what this client last saw, and the server answers "not modified"
 * instead of sending the messages again; adds extend the client's copy when nothing else changed
 * the memory. What the agent gets must always be exactly what a fresh client reads.
 */
class MessageCacheTest {

    private static final ObjectMapper TREES = new ObjectMapper();

    private ManagedChannel channel;
    /** Every GetMessages answer the cached client received, in order. */
    private final List<GetMessagesResponse> answers = new CopyOnWriteArrayList<>();
    /** Run once, when the first page of a longer history arrives (before the client sees it). */
    private final AtomicReference<Runnable> betweenPages = new AtomicReference<>();
    /** Run once, when the next GetMessages answer arrives (before the client sees it). */
    private final AtomicReference<Runnable> onNextAnswer = new AtomicReference<>();
    private Channel observed;

    @BeforeEach
    void connect() throws Exception {
        channel = Grpc.newChannelBuilder(TestServer.shared().target(), InsecureChannelCredentials.create()).build();
        observed = AnswerTaps.eachAnswer(channel, message -> {
            if (message instanceof GetMessagesResponse response) {
                answers.add(response);
                Runnable next = onNextAnswer.getAndSet(null);
                if (next != null) {
                    next.run();
                }
                Runnable change = response.getNextPageToken().isEmpty() ? null : betweenPages.getAndSet(null);
                if (change != null) {
                    change.run();
                }
            }
            return message;
        });
    }

    @AfterEach
    void close() {
        channel.shutdownNow();
    }

    private RemoteMemory cached(String id) {
        return RemoteMemory.builder().channel(observed).memoryId(id).coherentCache(false).build();
    }

    private RemoteMemory other(String id) {
        return RemoteMemory.builder().channel(channel).memoryId(id).coherentCache(false).build();
    }

    private static JsonNode json(List<Msg> messages) throws Exception {
        return TREES.readTree(JsonUtils.getJsonCodec().toJson(messages));
    }

    private GetMessagesResponse lastAnswer() {
        return answers.get(answers.size() - 1);
    }

    @Test
    void everyBlockTypeReadsTheSameFromTheCacheAsFromAFreshClient() throws Exception {
        String id = "cache-" + UUID.randomUUID();
        RemoteMemory memory = cached(id);
        memory.getMessages();
        for (Msg sample : SampleMessages.all().values()) {
            memory.addMessage(sample);
            List<Msg> got = memory.getMessages();
            assertTrue(lastAnswer().getNotModified(), "the add extended the cached copy");
            assertEquals(json(other(id).getMessages()), json(got));
        }
        // Lists are new and mutable; as with InMemoryMemory, a message read again is the same
        // object. What a caller changes in one never reaches the cached copy: it is not sent, and
        // a read that replaces the local copies (after a change by someone else) shows the
        // stored messages.
        JsonNode stored = json(other(id).getMessages());
        List<Msg> first = memory.getMessages();
        List<Msg> again = memory.getMessages();
        assertNotSame(first, again);
        for (int i = 0; i < first.size(); i++) {
            assertSame(first.get(i), again.get(i));
        }
        for (Msg m : first) {
            m.getMetadata().put("changed", Map.of("by", "the caller"));
            m.getMetadata().values().forEach(MessageCacheTest::scribble);
        }
        first.clear();
        assertEquals(again.size(), memory.getMessages().size());
        assertTrue(lastAnswer().getNotModified());
        assertEquals(stored, json(other(id).getMessages()));
        other(id).deleteMessage(0);
        List<Msg> afterDelete = memory.getMessages();
        assertEquals(json(other(id).getMessages()), json(afterDelete));
        assertEquals(stored.size() - 1, afterDelete.size());
    }

    /** Changes every mutable map and list inside, at any depth. */
    @SuppressWarnings("unchecked")
    private static void scribble(Object value) {
        if (value instanceof Map<?, ?> map) {
            new ArrayList<>(map.values()).forEach(MessageCacheTest::scribble);
            try {
                ((Map<String, Object>) map).put("scribbled", true);
            } catch (UnsupportedOperationException immutable) {
                // fine: nobody can change it
            }
        } else if (value instanceof List<?> list) {
            new ArrayList<>(list).forEach(MessageCacheTest::scribble);
            try {
                ((List<Object>) list).add("scribbled");
            } catch (UnsupportedOperationException immutable) {
                // fine: nobody can change it
            }
        }
    }

    @Test
    void changesByOtherClientsAreSeen() throws Exception {
        String id = "cache-" + UUID.randomUUID();
        RemoteMemory memory = cached(id);
        RemoteMemory someoneElse = other(id);
        memory.addMessage(Msg.builder().role(MsgRole.USER).name("user").textContent("mine").build());
        memory.getMessages();
        memory.getMessages();
        assertTrue(lastAnswer().getNotModified());

        someoneElse.addMessage(Msg.builder().role(MsgRole.ASSISTANT).name("a").textContent("theirs").build());
        assertEquals(json(someoneElse.getMessages()), json(memory.getMessages()));
        assertTrue(lastAnswer().getDelta(), "only their message came");
        assertEquals(1, lastAnswer().getMessagesCount());
        // My next add follows theirs; my copy must not miss their message.
        memory.addMessage(Msg.builder().role(MsgRole.USER).name("user").textContent("mine again").build());
        someoneElse.addMessage(Msg.builder().role(MsgRole.USER).name("user").textContent("theirs again").build());
        assertEquals(json(someoneElse.getMessages()), json(memory.getMessages()));

        someoneElse.deleteMessage(0);
        assertEquals(json(someoneElse.getMessages()), json(memory.getMessages()));
        someoneElse.clear();
        assertEquals(List.of(), memory.getMessages());

        // Deleted and created again with the same number of changes: still not mistaken for the old one.
        List<String> texts = new ArrayList<>();
        memory.addMessage(Msg.builder().role(MsgRole.USER).name("user").textContent("before").build());
        memory.getMessages();
        MemoryServiceGrpc.newBlockingStub(channel).deleteMemory(DeleteMemoryRequest.newBuilder().setMemoryId(id).build());
        RemoteMemory recreated = other(id);
        recreated.addMessage(Msg.builder().role(MsgRole.USER).name("user").textContent("after").build());
        for (Msg m : memory.getMessages()) {
            texts.add(m.getTextContent());
        }
        assertEquals(List.of("after"), texts);
    }

    private static Msg text(MsgRole role, String text) {
        return Msg.builder().role(role).name(role == MsgRole.USER ? "user" : "a").textContent(text).build();
    }

    @Test
    void twoClientsWritingOneMemoryExchangeOnlyWhatTheOtherAdded() throws Exception {
        String id = "cache-" + UUID.randomUUID();
        RemoteMemory memory = cached(id);
        RemoteMemory someoneElse = other(id);
        List<Msg> history = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            history.add(text(MsgRole.USER, "earlier " + i));
        }
        memory.addMessages(history);
        assertEquals(50, memory.getMessages().size());
        for (int turn = 0; turn < 3; turn++) {
            // Theirs lands first, then mine: my add does not follow my copy, which still holds.
            someoneElse.addMessage(text(MsgRole.ASSISTANT, "theirs " + turn));
            memory.addMessage(text(MsgRole.USER, "mine " + turn));
            int before = answers.size();
            List<Msg> got = memory.getMessages();
            assertEquals(json(someoneElse.getMessages()), json(got));
            GetMessagesResponse answer = answers.get(before);
            assertTrue(answer.getDelta(), "turn " + turn + ": a delta");
            assertEquals(List.of("theirs " + turn, "mine " + turn), texts(MsgConverter.fromProto(answer.getMessagesList())));
            memory.getMessages();
            assertTrue(lastAnswer().getNotModified());
        }
        // A removal by the other client: everything comes again, and nothing stale survives.
        someoneElse.deleteMessage(1);
        someoneElse.addMessage(text(MsgRole.ASSISTANT, "after the delete"));
        memory.addMessage(text(MsgRole.USER, "mine after the delete"));
        List<Msg> got = memory.getMessages();
        assertEquals(json(someoneElse.getMessages()), json(got));
        assertTrue(!lastAnswer().getDelta() && lastAnswer().getMessagesCount() == got.size());
        assertEquals("earlier 2", got.get(1).getTextContent());
        // A rewrite to the same length (a state load): still everything.
        List<Msg> rewritten = new ArrayList<>();
        for (Msg m : got) {
            rewritten.add(text(MsgRole.USER, "rewritten " + m.getTextContent()));
        }
        someoneElse.clear();
        someoneElse.addMessages(rewritten.subList(0, rewritten.size() - 1));
        someoneElse.addMessage(rewritten.get(rewritten.size() - 1));
        assertEquals(texts(rewritten), texts(memory.getMessages()));
        assertTrue(!lastAnswer().getDelta());
    }

    /**
     * This client's own delete and clear keep its copy: their answers name the state before and
     * after, so the next getMessages is answered "not modified" instead of sending the whole
     * (here 1500-message, two-page) history again, as it did after every delete. Another
     * client's add between the copy and the delete makes the next read fetch everything, as
     * before; what the agent gets is always what a fresh client reads.
     */
    @Test
    void ownDeletesAndClearsKeepTheCopyWithoutReadingTheHistoryAgain() throws Exception {
        String id = "cache-自己删-" + UUID.randomUUID();
        RemoteMemory memory = cached(id);
        RemoteMemory someoneElse = other(id);
        List<Msg> history = new ArrayList<>();
        for (int i = 0; i < 1500; i++) {
            history.add(text(i % 2 == 0 ? MsgRole.USER : MsgRole.ASSISTANT, "第" + i + "句"));
        }
        memory.addMessages(history.subList(0, 750));
        memory.addMessages(history.subList(750, 1500));
        assertEquals(1500, memory.getMessages().size());

        memory.deleteMessage(3);
        int before = answers.size();
        List<Msg> got = memory.getMessages();
        assertEquals(1, answers.size() - before);
        assertTrue(lastAnswer().getNotModified(), "the copy without the deleted message is current");
        assertEquals(json(someoneElse.getMessages()), json(got));
        assertEquals("第4句", got.get(3).getTextContent());

        memory.deleteMessage(5000); // past the end: nothing changes, the copy stays
        memory.getMessages();
        assertTrue(lastAnswer().getNotModified());

        // Another client's add before the delete: the delete's own look at the list takes it
        // in (a delta), so the delete is still the only change since the copy.
        someoneElse.addMessage(text(MsgRole.USER, "别人插话"));
        memory.deleteMessage(0);
        got = memory.getMessages();
        assertTrue(lastAnswer().getNotModified());
        assertEquals(json(someoneElse.getMessages()), json(got));
        assertEquals("别人插话", got.get(got.size() - 1).getTextContent());
        assertEquals(1499, got.size());

        // Another client's add between that look and the delete: the delete was not the only
        // change since the copy, so the next read fetches everything, as before.
        onNextAnswer.set(() -> someoneElse.addMessage(text(MsgRole.ASSISTANT, "别人又插话")));
        memory.deleteMessage(0);
        got = memory.getMessages();
        assertTrue(!lastAnswer().getNotModified() && !lastAnswer().getDelta());
        assertEquals(json(someoneElse.getMessages()), json(got));
        assertEquals("别人又插话", got.get(got.size() - 1).getTextContent());
        assertEquals(1499, got.size());

        memory.clear();
        before = answers.size();
        assertEquals(List.of(), memory.getMessages());
        assertEquals(1, answers.size() - before);
        assertTrue(lastAnswer().getNotModified(), "the empty copy is current");
        someoneElse.addMessage(text(MsgRole.ASSISTANT, "清空之后"));
        assertEquals(List.of("清空之后"), texts(memory.getMessages()));
        assertTrue(lastAnswer().getDelta());
    }

    /**
     * A saved conversation of 1500 messages (two pages): every block type and every null
     * AgentScope-Java writes, then Chinese and English text.
     */
    private static List<Msg> savedConversation() {
        List<Msg> saved = new ArrayList<>(SampleMessages.all().values());
        while (saved.size() < 1500) {
            int i = saved.size();
            saved.add(text(i % 2 == 0 ? MsgRole.USER : MsgRole.ASSISTANT, "第" + i + "句 sentence " + i));
        }
        return saved;
    }

    /**
     * This client's own loadFrom keeps its copy: the loaded messages are the memory's messages,
     * named by the load's etag, so the next getMessages is answered "not modified" instead of
     * sending the whole (here 1500-message, two-page) history back, as it did after every load.
     * Another client's change after the load is still read (just its message for an add,
     * everything for a delete), and a refused load leaves the copy as it was; what the agent
     * gets is always what a fresh client reads.
     */
    @Test
    void ownLoadFromKeepsTheLoadedCopyWithoutReadingTheHistoryAgain() throws Exception {
        String id = "cache-自己载入-" + UUID.randomUUID();
        RemoteMemory memory = cached(id);
        RemoteMemory someoneElse = other(id);
        memory.addMessage(text(MsgRole.USER, "载入之前"));
        assertEquals(List.of("载入之前"), texts(memory.getMessages()));
        InMemorySession session = new InMemorySession();
        SessionKey key = SimpleSessionKey.of("会话-" + UUID.randomUUID());
        session.save(key, RemoteMemory.MESSAGES_KEY, savedConversation());

        memory.loadFrom(session, key);
        int before = answers.size();
        List<Msg> got = memory.getMessages();
        assertEquals(1, answers.size() - before, "one call, not the two pages of the history");
        assertTrue(lastAnswer().getNotModified(), "the loaded copy is current");
        assertEquals(json(someoneElse.getMessages()), json(got));
        assertEquals(1500, got.size());
        assertEquals("第1499句 sentence 1499", got.get(1499).getTextContent());

        // Another client's add after the load: only its message comes.
        someoneElse.addMessage(text(MsgRole.ASSISTANT, "别人插话"));
        got = memory.getMessages();
        assertTrue(lastAnswer().getDelta());
        assertEquals(1, lastAnswer().getMessagesCount());
        assertEquals(json(someoneElse.getMessages()), json(got));

        // Another client's delete after the next load: everything comes again.
        memory.loadFrom(session, key);
        someoneElse.deleteMessage(0);
        before = answers.size();
        got = memory.getMessages();
        assertEquals(2, answers.size() - before, "the whole history, in two pages");
        assertTrue(!lastAnswer().getNotModified() && !lastAnswer().getDelta());
        assertEquals(json(someoneElse.getMessages()), json(got));
        assertEquals(1499, got.size());

        // A load the server refuses (a message over its limit) changes nothing: the copy stays.
        SessionKey tooBig = SimpleSessionKey.of("太大-" + UUID.randomUUID());
        session.save(tooBig, RemoteMemory.MESSAGES_KEY, List.of(text(MsgRole.USER, "太大 " + "x".repeat(5 << 20))));
        RemoteMemoryException refused = assertThrows(RemoteMemoryException.class, () -> memory.loadFrom(session, tooBig));
        assertEquals(io.grpc.Status.Code.RESOURCE_EXHAUSTED, refused.getCode());
        before = answers.size();
        assertEquals(json(got), json(memory.getMessages()));
        assertEquals(1, answers.size() - before);
        assertTrue(lastAnswer().getNotModified(), "the copy from before the refused load is current");
    }

    /** The same for an auto-context memory: its working messages, as loaded, are the copy. */
    @Test
    void ownAutoContextLoadFromKeepsTheLoadedWorkingMessages() throws Exception {
        String id = "cache-自动载入-" + UUID.randomUUID();
        RemoteAutoContextMemory memory = RemoteAutoContextMemory.builder().channel(observed).memoryId(id)
                .coherentCache(false).build();
        RemoteAutoContextMemory someoneElse = RemoteAutoContextMemory.builder().channel(channel).memoryId(id)
                .coherentCache(false).build();
        memory.addMessage(text(MsgRole.USER, "载入之前"));
        memory.getMessages();
        List<Msg> working = savedConversation();
        InMemorySession session = new InMemorySession();
        SessionKey key = SimpleSessionKey.of("会话-" + UUID.randomUUID());
        session.save(key, RemoteAutoContextMemory.WORKING_KEY, working);
        session.save(key, RemoteAutoContextMemory.ORIGINAL_KEY, working.subList(0, 10));

        memory.loadFrom(session, key);
        int before = answers.size();
        List<Msg> got = memory.getMessages();
        assertEquals(1, answers.size() - before);
        assertTrue(lastAnswer().getNotModified(), "the loaded working messages are current");
        assertEquals(json(someoneElse.getMessages()), json(got));
        assertEquals(1500, got.size());
        assertEquals(10, memory.getOriginalMemoryMsgs().size());

        someoneElse.addMessage(text(MsgRole.ASSISTANT, "别人插话"));
        got = memory.getMessages();
        assertTrue(lastAnswer().getDelta());
        assertEquals(json(someoneElse.getMessages()), json(got));
    }

    @Test
    void aHistoryRewrittenBetweenPagesIsReadAgain() throws Exception {
        String id = "cache-" + UUID.randomUUID();
        RemoteMemory memory = RemoteMemory.builder().channel(observed).memoryId(id).pageSize(3).coherentCache(false).build();
        RemoteMemory someoneElse = other(id);
        List<Msg> before = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            before.add(Msg.builder().role(MsgRole.USER).name("user").textContent("old " + i).build());
        }
        someoneElse.addMessages(before);
        // As a compression does: the history is replaced while the client is between pages.
        betweenPages.set(() -> {
            someoneElse.clear();
            for (int i = 0; i < 4; i++) {
                someoneElse.addMessage(Msg.builder().role(MsgRole.ASSISTANT).name("a").textContent("new " + i).build());
            }
        });
        List<String> texts = new ArrayList<>();
        for (Msg m : memory.getMessages()) {
            texts.add(m.getTextContent());
        }
        assertEquals(List.of("new 0", "new 1", "new 2", "new 3"), texts);
        assertTrue(answers.size() >= 3, "the first read was abandoned: " + answers.size() + " answers");
    }

    @Test
    void pagedReadsAreCachedOnlyWhenNothingChangedInBetween() throws Exception {
        String id = "cache-" + UUID.randomUUID();
        RemoteMemory memory = RemoteMemory.builder().channel(observed).memoryId(id).pageSize(3).coherentCache(false).build();
        List<Msg> batch = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            batch.add(Msg.builder().role(MsgRole.USER).name("user").textContent("m" + i).build());
        }
        other(id).addMessages(batch);
        assertEquals(10, memory.getMessages().size());
        assertEquals(4, answers.size(), "four pages of three");
        assertEquals(json(other(id).getMessages()), json(memory.getMessages()));
        assertTrue(lastAnswer().getNotModified());
        assertEquals(5, answers.size(), "one call answered the repeat");
    }
}
