package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.MemoryServiceGrpc;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.memory.Memory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.util.JsonUtils;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class RemoteMemoryTest {

    private static final ObjectMapper TREES = new ObjectMapper();
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

    static RemoteMemory fresh() {
        return RemoteMemory.builder().connection(connection).memoryId("t-" + UUID.randomUUID()).build();
    }

    static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    static List<String> texts(Memory memory) {
        List<String> out = new ArrayList<>();
        for (Msg m : memory.getMessages()) {
            out.add(m.getTextContent());
        }
        return out;
    }

    static JsonNode json(Object value) throws Exception {
        return TREES.readTree(JsonUtils.getJsonCodec().toJson(value));
    }

    /**
     * A memory built with target(...) opens its own connection; a program that drops it without
     * close() must not keep that socket open for the life of the process. Once the memory is
     * collected (after its watch went idle), its channel is shut down; what it added is stored.
     */
    @Test
    void aMemoryDroppedWithoutCloseHasItsChannelShutDown() throws Exception {
        String memoryId = "unclosed-" + UUID.randomUUID();
        ManagedChannel channel = usedAndDropped(memoryId);
        assertTrue(dev.agentscopememory.client.ConnectionProbe.collectUntil(channel::isShutdown, Duration.ofSeconds(30)),
                "the channel of a collected, unclosed memory is still open");
        RemoteMemory reader = RemoteMemory.builder().connection(connection).memoryId(memoryId).build();
        assertEquals(List.of("hello", "hi"), texts(reader));
    }

    private static ManagedChannel usedAndDropped(String memoryId) {
        RemoteMemory memory = RemoteMemory.builder().target(server.target()).memoryId(memoryId)
                .watchIdleTimeout(Duration.ofMillis(200)).build();
        memory.addMessage(user("hello"));
        memory.addMessage(Msg.builder().role(MsgRole.ASSISTANT).name("a").textContent("hi").build());
        assertEquals(List.of("hello", "hi"), texts(memory));
        assertTrue(memory.watchOpen());
        return dev.agentscopememory.client.ConnectionProbe.ownedChannel(memory.getConnection());
    }

    @Test
    void newMemoryIsEmptyAndListsAreFreshAndMutable() {
        RemoteMemory memory = fresh();
        List<Msg> first = memory.getMessages();
        assertTrue(first.isEmpty());
        memory.addMessage(user("one"));
        List<Msg> a = memory.getMessages();
        List<Msg> b = memory.getMessages();
        assertNotSame(a, b);
        a.clear(); // callers mutate the list they get; the memory must not change
        a.add(user("not stored"));
        assertEquals(List.of("one"), texts(memory));
    }

    @Test
    void everyBlockTypeSurvivesTheServer() throws Exception {
        RemoteMemory memory = fresh();
        List<Msg> originals = new ArrayList<>(SampleMessages.all().values());
        for (Msg m : originals) {
            memory.addMessage(m);
        }
        List<Msg> back = memory.getMessages();
        assertEquals(originals.size(), back.size());
        for (int i = 0; i < originals.size(); i++) {
            assertEquals(json(originals.get(i)), json(back.get(i)), "message " + i);
        }
    }

    /** The server's stored JSON (what it exports to sessions) is byte for byte Java's own. */
    @Test
    void serverStateJsonIsJacksonsJson() {
        RemoteMemory memory = fresh();
        List<Msg> originals = new ArrayList<>(SampleMessages.all().values());
        memory.addMessages(originals);
        dev.agentscopememory.grpc.v1.SaveStateResponse state = connection.call("StateService/SaveState", true,
                () -> connection.stateService().saveState(dev.agentscopememory.grpc.v1.SaveStateRequest.newBuilder()
                        .setMemoryId(memory.getMemoryId()).build()));
        assertEquals(1, state.getEntriesCount());
        assertEquals(RemoteMemory.MESSAGES_KEY, state.getEntries(0).getKey());
        List<String> items = state.getEntries(0).getList().getItemsList();
        assertEquals(originals.size(), items.size());
        for (int i = 0; i < originals.size(); i++) {
            assertEquals(JsonUtils.getJsonCodec().toJson(originals.get(i)), items.get(i), "message " + i);
        }
    }

    @Test
    void pagesAreJoinedInInsertionOrder() {
        RemoteMemory memory = RemoteMemory.builder().connection(connection)
                .memoryId("t-" + UUID.randomUUID()).pageSize(2).build();
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < 7; i++) {
            memory.addMessage(user("m" + i));
            expected.add("m" + i);
        }
        assertEquals(expected, texts(memory));
        assertEquals(7, memory.messageCount());
    }

    @Test
    void batchAddKeepsOrder() {
        RemoteMemory memory = fresh();
        List<Msg> many = new ArrayList<>();
        for (int i = 0; i < RemoteMemory.ADD_BATCH_MESSAGES + 20; i++) {
            many.add(user("b" + i));
        }
        memory.addMessages(many);
        List<String> got = texts(memory);
        assertEquals(many.size(), got.size());
        assertEquals("b0", got.get(0));
        assertEquals("b" + (many.size() - 1), got.get(got.size() - 1));
    }

    /**
     * AgentScope's deleteMessage(i) names index i of the list getMessages returned (and this
     * client's adds since). Another client deleting a message in between moves the others; the
     * delete must still remove the message the caller meant, with the coherent cache and without.
     */
    @Test
    void aDeleteRemovesTheMessageTheCallerSawWhateverAnotherClientDeletedSince() {
        for (boolean coherent : List.of(true, false)) {
            String id = "删除-" + UUID.randomUUID();
            RemoteMemory mine = RemoteMemory.builder().connection(connection).memoryId(id).coherentCache(coherent).build();
            RemoteMemory theirs = RemoteMemory.builder().connection(connection).memoryId(id).coherentCache(coherent).build();
            mine.addMessages(List.of(user("甲"), user("乙"), user("丙"), user("丁")));
            assertEquals(List.of("甲", "乙", "丙", "丁"), texts(mine));
            theirs.getMessages();
            theirs.deleteMessage(0); // 甲: 乙 moves to index 0
            mine.deleteMessage(1); // 乙 in the list mine holds, not 丙 (now at index 1)
            assertEquals(List.of("丙", "丁"), texts(theirs), "coherent " + coherent);

            // Mine adds after its read count too; a message the other deleted already is gone.
            List<Msg> seen = mine.getMessages();
            mine.addMessage(user("戊"));
            theirs.getMessages();
            theirs.deleteMessage(1); // 丁
            mine.deleteMessage(1); // 丁 in the list mine holds: deleted already, nothing more
            assertEquals(List.of("丙", "戊"), texts(theirs), "coherent " + coherent);
            mine.deleteMessage(1); // 戊, added after the read, at 1 once 丁 is out of the list mine holds
            assertEquals(List.of("丙"), texts(theirs), "coherent " + coherent);
            assertEquals(2, seen.size());
            // What the caller does to the list it got is not what it read.
            List<Msg> again = mine.getMessages();
            again.add(0, user("only in the caller's list"));
            mine.deleteMessage(0);
            assertEquals(List.of(), texts(theirs), "coherent " + coherent);
        }
    }

    @Test
    void deleteFollowsInMemoryMemory() {
        Memory remote = fresh();
        Memory local = new InMemoryMemory();
        for (Memory m : List.of(remote, local)) {
            m.addMessage(user("a"));
            m.addMessage(user("b"));
            m.addMessage(user("c"));
            m.deleteMessage(-1);
            m.deleteMessage(Integer.MIN_VALUE);
            m.deleteMessage(3);
            m.deleteMessage(Integer.MAX_VALUE);
            m.deleteMessage(1);
        }
        assertEquals(List.of("a", "c"), texts(remote));
        assertEquals(texts(local), texts(remote));
        remote.deleteMessage(0);
        remote.deleteMessage(0);
        remote.deleteMessage(0); // on an empty memory: nothing
        assertEquals(List.of(), texts(remote));
    }

    @Test
    void clearEmptiesAndIsRepeatable() {
        Memory memory = fresh();
        memory.clear();
        memory.addMessage(user("x"));
        memory.addMessage(user("y"));
        memory.clear();
        assertEquals(List.of(), memory.getMessages());
        memory.addMessage(user("z"));
        assertEquals(List.of("z"), texts(memory));
    }

    @Test
    void nullMessageIsIgnored() {
        Memory memory = fresh();
        memory.addMessage(null);
        memory.addMessage(user("x"));
        assertEquals(List.of("x"), texts(memory));
    }

    @Test
    void twoClientsSeeTheSameMemory() {
        String id = "t-" + UUID.randomUUID();
        try (RemoteMemory a = RemoteMemory.builder().target(server.target()).memoryId(id).build();
                RemoteMemory b = RemoteMemory.builder().target(server.target()).memoryId(id).build()) {
            a.addMessage(user("from a"));
            b.addMessage(user("from b"));
            assertEquals(List.of("from a", "from b"), texts(a));
        }
    }

    /** A reply lost after the server stored the messages: the retry must not store them twice. */
    @Test
    void retriedAddAfterLostReplyStoresOnce() throws Exception {
        AtomicInteger lost = new AtomicInteger(1);
        AtomicInteger addCalls = new AtomicInteger();
        ClientInterceptor loseFirstAddReply = new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                boolean isAdd = method.equals(MemoryServiceGrpc.getAddMessagesMethod());
                if (isAdd) {
                    addCalls.incrementAndGet();
                }
                return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                    @Override
                    public void start(Listener<R> listener, Metadata headers) {
                        super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                            @Override
                            public void onMessage(R message) {
                                if (!(isAdd && lost.get() > 0)) {
                                    super.onMessage(message);
                                }
                            }

                            @Override
                            public void onClose(Status status, Metadata trailers) {
                                if (isAdd && status.isOk() && lost.getAndDecrement() > 0) {
                                    super.onClose(Status.UNAVAILABLE.withDescription("connection reset (test)"), new Metadata());
                                } else {
                                    super.onClose(status, trailers);
                                }
                            }
                        }, headers);
                    }
                };
            }
        };
        ManagedChannel base = server.channel();
        try {
            Channel flaky = ClientInterceptors.intercept(base, loseFirstAddReply);
            RemoteMemory memory = RemoteMemory.builder().channel(flaky).memoryId("t-" + UUID.randomUUID())
                    .retryBackoff(Duration.ofMillis(10)).build();
            memory.addMessage(user("once"));
            assertEquals(2, addCalls.get(), "the add was retried");
            assertEquals(List.of("once"), texts(memory));
        } finally {
            base.shutdownNow();
        }
    }

    @Test
    void missingMemoryWithoutCreateIsNotFound() {
        String id = "t-missing-" + UUID.randomUUID();
        RemoteMemory memory = RemoteMemory.builder().connection(connection).memoryId(id)
                .createIfMissing(false).build();
        RemoteMemoryException e = assertThrows(RemoteMemoryException.class, memory::getMessages);
        assertInstanceOf(RemoteMemoryException.NotFound.class, e);
        assertEquals(Status.Code.NOT_FOUND, e.getCode());
        assertTrue(e.getServerMessage().contains(id), e.getServerMessage());
        assertTrue(e.getMessage().contains("GetMessages"), e.getMessage());
    }

    @Test
    void invalidIdFailsAtBuildNamingTheField() {
        // Spaces are fine in ids (any Unicode text is); control characters are not.
        RemoteMemory spaced = RemoteMemory.builder().connection(connection)
                .memoryId("spaces are allowed " + UUID.randomUUID()).build();
        spaced.addMessage(user("x"));
        assertEquals(1, spaced.getMessages().size());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> RemoteMemory.builder().connection(connection).memoryId("tab\tid").build());
        assertTrue(e.getMessage().startsWith("memory_id: contains a control character U+0009"), e.getMessage());
    }

    @Test
    void oversizedMessageIsRejectedAndNothingIsStored() {
        RemoteMemory memory = fresh();
        memory.addMessage(user("kept"));
        // Over the server's per-message limit (4 MiB by default); the batch is all or nothing.
        Msg huge = user("x".repeat(5 * 1024 * 1024));
        RemoteMemoryException e = assertThrows(RemoteMemoryException.class,
                () -> memory.addMessages(List.of(user("not stored"), huge)));
        assertInstanceOf(RemoteMemoryException.ResourceExhausted.class, e);
        assertTrue(e.getServerMessage().contains("messages[1]"), e.getServerMessage());
        assertEquals(List.of("kept"), texts(memory));
    }

    @Test
    void invalidWireMessageIsInvalidArgumentNamingTheField() {
        RemoteMemory memory = fresh();
        dev.agentscopememory.grpc.v1.AddMessagesRequest bad = dev.agentscopememory.grpc.v1.AddMessagesRequest.newBuilder()
                .setMemoryId(memory.getMemoryId())
                .addMessages(dev.agentscopememory.grpc.v1.Msg.newBuilder().setRole(dev.agentscopememory.grpc.v1.Role.ROLE_USER)
                        .setMetadataJson("[not an object]"))
                .build();
        memory.addMessage(user("kept")); // creates the memory
        RemoteMemoryException e = assertThrows(RemoteMemoryException.class, () -> connection.call(
                "MemoryService/AddMessages", true, () -> connection.memoryService().addMessages(bad)));
        assertInstanceOf(RemoteMemoryException.InvalidArgument.class, e);
        assertTrue(e.getServerMessage().contains("metadata"), e.getServerMessage());
        assertEquals(List.of("kept"), texts(memory));
    }

    @Test
    void deadlineExceededIsReported() {
        // A slow server, however fast this one is: each unary call starts 50 ms late (past its
        // deadline, so it fails without reaching the server), and every answer comes 50 ms late
        // (the watch's: past the wait for its start).
        ManagedChannel own = Grpc.newChannelBuilder(server.target(), InsecureChannelCredentials.create()).build();
        Channel unaryLate = ClientInterceptors.intercept(own, new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                if (method.getType() == MethodDescriptor.MethodType.UNARY) {
                    pause();
                }
                return next.newCall(method, options);
            }
        });
        Channel slow = AnswerTaps.eachAnswer(unaryLate, answer -> {
            pause();
            return answer;
        });
        RemoteMemory memory = RemoteMemory.builder().channel(slow).memoryId("t-" + UUID.randomUUID())
                .deadline(Duration.ofMillis(10)).build();
        try (memory) {
            RemoteMemoryException e = assertThrows(RemoteMemoryException.class, memory::getMessages);
            assertInstanceOf(RemoteMemoryException.DeadlineExceeded.class, e);
            assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getCode());
        } finally {
            own.shutdownNow();
        }
    }

    @Test
    void serverDownIsUnavailable() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        RemoteMemory memory = RemoteMemory.builder().target("127.0.0.1:" + port).memoryId("t-down")
                .maxAttempts(2).retryBackoff(Duration.ofMillis(10)).build();
        try (memory) {
            RemoteMemoryException e = assertThrows(RemoteMemoryException.class, () -> memory.addMessage(user("x")));
            assertInstanceOf(RemoteMemoryException.Unavailable.class, e);
            assertTrue(e.getMessage().contains("UNAVAILABLE"), e.getMessage());
        }
    }

    @Test
    void aLoneSurrogateIsRefusedNamingTheFieldNotStoredAsAQuestionMark() {
        // A model's stream cut inside an emoji leaves half a surrogate pair; UTF-8 (and so
        // protobuf) cannot carry it, and protobuf-java silently wrote '?' in its place.
        try (RemoteMemory memory = fresh()) {
            memory.addMessage(user("before \uD83D\uDE00"));
            IllegalArgumentException text = assertThrows(IllegalArgumentException.class,
                    () -> memory.addMessage(user("half \uD83D end")));
            assertTrue(text.getMessage().startsWith("content[0].text: contains a lone surrogate at character 5"),
                    text.getMessage());
            Msg inMetadata = Msg.builder().role(MsgRole.USER).textContent("ok")
                    .metadata(java.util.Map.of("note", java.util.Map.of("\uDE00k", "v"))).build();
            IllegalArgumentException metadata = assertThrows(IllegalArgumentException.class,
                    () -> memory.addMessage(inMetadata));
            assertTrue(metadata.getMessage().startsWith("metadata.note: a key contains a lone surrogate"),
                    metadata.getMessage());
            Msg toolInput = Msg.builder().role(MsgRole.ASSISTANT).content(new io.agentscope.core.message.ToolUseBlock(
                    "call_1", "search", java.util.Map.of("q", java.util.List.of("a", "x\uD83D")))).build();
            IllegalArgumentException input = assertThrows(IllegalArgumentException.class,
                    () -> memory.addMessage(toolInput));
            assertTrue(input.getMessage().startsWith("content[0].input.q[1]: contains a lone surrogate"),
                    input.getMessage());
            memory.flush();
            try (RemoteMemory other = RemoteMemory.builder().connection(connection).memoryId(memory.getMemoryId())
                    .coherentCache(false).build()) {
                assertEquals(List.of("before \uD83D\uDE00"), texts(other));
            }
            assertEquals(List.of("before \uD83D\uDE00"), texts(memory));
        }
    }

    @Test
    void builderRejectsBadOptions() {
        assertThrows(IllegalArgumentException.class, () -> RemoteMemory.builder().target("x:1").build());
        assertThrows(IllegalArgumentException.class, () -> RemoteMemory.builder().memoryId("m").build());
        assertThrows(IllegalArgumentException.class,
                () -> RemoteMemory.builder().connection(connection).target("x:1").memoryId("m").build());
        assertThrows(IllegalArgumentException.class, () -> RemoteMemory.builder().deadline(Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> RemoteMemory.builder().pageSize(-1));
    }

    private static void pause() {
        try {
            Thread.sleep(50);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
