package dev.agentscopememory.agentscope1;

import static dev.agentscopememory.agentscope1.SampleMessages.texts;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.DeleteMemoryRequest;
import dev.agentscopememory.grpc.v1.WatchMessagesResponse;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.session.InMemorySession;
import io.agentscope.core.state.SessionKey;
import io.agentscope.core.state.SimpleSessionKey;
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
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Coherent caching ({@code coherentCache(true)}): reads come from the client's own copy with no
 * call while its lease is fresh, and still a write by any client is seen by the next read after
 * it was acknowledged. When the watch stream is lost, reads go back to conditional calls; a
 * server that cannot offer it (PostgreSQL) leaves them conditional.
 */
class CoherentCacheTest {

    private static final ObjectMapper TREES = new ObjectMapper();

    private ManagedChannel channel;
    /** GetMessages calls the watching client made. */
    private final AtomicInteger reads = new AtomicInteger();
    /** The watching client's WatchMessages calls, to cut them as a lost connection would. */
    private final List<ClientCall<?, ?>> watches = new CopyOnWriteArrayList<>();
    private Channel observed;
    /** When set, the next AddMessages answer is lost after the server stored the messages. */
    private final AtomicBoolean loseNextAddAnswer = new AtomicBoolean();
    /** AddMessages calls (unary) the watching client made. */
    private final AtomicInteger unaryAdds = new AtomicInteger();
    /**
     * When set, the watch stream carrying the next add answer breaks (as a lost connection) after
     * the server stored the messages, before the answer arrives.
     */
    private final AtomicBoolean breakWatchBeforeNextAddAnswer = new AtomicBoolean();

    @BeforeEach
    void connect() throws Exception {
        channel = Grpc.newChannelBuilder(TestServer.shared().target(), InsecureChannelCredentials.create()).build();
        observed = observe(channel);
    }

    /** The channel with the watching client's calls counted and, on request, answers lost. */
    private Channel observe(Channel channel) {
        Channel counted = CountedCalls.on(channel, Map.of("GetMessages", reads, "AddMessages", unaryAdds));
        return ClientInterceptors.intercept(counted, new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                ClientCall<Q, R> call = next.newCall(method, options);
                if (method.getFullMethodName().endsWith("/WatchMessages")) {
                    call = breakingBeforeAddAnswer(call);
                    watches.add(call);
                }
                if (method.getFullMethodName().endsWith("/AddMessages") && loseNextAddAnswer.getAndSet(false)) {
                    return new ForwardingClientCall.SimpleForwardingClientCall<>(call) {
                        @Override
                        public void start(Listener<R> listener, Metadata headers) {
                            super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                                @Override
                                public void onMessage(R message) {
                                    // stored on the server; the answer never arrives
                                }

                                @Override
                                public void onClose(Status status, Metadata trailers) {
                                    super.onClose(Status.UNAVAILABLE.withDescription("answer lost (test)"), trailers);
                                }
                            }, headers);
                        }
                    };
                }
                return call;
            }
        });
    }

    private <Q, R> ClientCall<Q, R> breakingBeforeAddAnswer(ClientCall<Q, R> call) {
        return new ForwardingClientCall.SimpleForwardingClientCall<>(call) {
            @Override
            public void start(Listener<R> listener, Metadata headers) {
                ClientCall<Q, R> self = this;
                super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                    @Override
                    public void onMessage(R message) {
                        if (message instanceof WatchMessagesResponse r && r.hasAdded()
                                && breakWatchBeforeNextAddAnswer.getAndSet(false)) {
                            // stored on the server; the stream breaks before the answer arrives
                            self.cancel("connection lost (test)", null);
                            return;
                        }
                        super.onMessage(message);
                    }
                }, headers);
            }
        };
    }

    @AfterEach
    void close() {
        channel.shutdownNow();
    }

    private RemoteMemory watching(String id) {
        // Adds that wait for their answers: what this class tests is the watch, not pipelining.
        return RemoteMemory.builder().channel(observed).memoryId(id).coherentCache(true)
                .addConfirmation(AddConfirmation.EVERY_ADD).build();
    }

    private RemoteMemory plain(String id) {
        return RemoteMemory.builder().channel(channel).memoryId(id).coherentCache(false).build();
    }

    private static Msg text(MsgRole role, String text) {
        return Msg.builder().role(role).name(role == MsgRole.USER ? "user" : "a").textContent(text).build();
    }

    private static JsonNode json(List<Msg> messages) throws Exception {
        return TREES.readTree(JsonUtils.getJsonCodec().toJson(messages));
    }

    /** Waits (at most 10 s) until reads are served from the copy: the watch starts in the background. */
    private static void until(BooleanSupplier condition) throws InterruptedException {
        for (int i = 0; i < 1000 && !condition.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertTrue(condition.getAsBoolean(), "the watch did not start");
    }

    @Test
    void readsNeedNoCallAndAnotherClientsWriteIsSeenByTheNextRead() throws Exception {
        String id = "coherent-" + UUID.randomUUID();
        try (RemoteMemory memory = watching(id)) {
            RemoteMemory someoneElse = plain(id);
            memory.addMessage(text(MsgRole.USER, "hello"));
            memory.getMessages();
            until(memory::servesFromCache);
            int before = reads.get();
            for (int i = 0; i < 5; i++) {
                assertEquals(List.of("hello"), texts(memory.getMessages()));
            }
            // Its own adds go over the watch and keep the copy current: still no call.
            int unaryBefore = unaryAdds.get();
            memory.addMessage(text(MsgRole.ASSISTANT, "mine"));
            assertEquals(List.of("hello", "mine"), texts(memory.getMessages()));
            assertEquals(before, reads.get(), "served from the copy");
            assertEquals(unaryBefore, unaryAdds.get(), "the add went over the watch");

            // Another client's add is acknowledged only once this client took it in, so the very
            // next read sees it, with the added message carried by the announcement.
            someoneElse.addMessage(text(MsgRole.USER, "theirs"));
            assertEquals(json(someoneElse.getMessages()), json(memory.getMessages()));
            assertEquals(before, reads.get(), "the announcement carried the message");

            // A rewrite is announced too: the next read asks, and gets the whole list.
            someoneElse.deleteMessage(0);
            assertEquals(List.of("mine", "theirs"), texts(memory.getMessages()));
            assertEquals(before + 1, reads.get());
            someoneElse.clear();
            assertEquals(List.of(), memory.getMessages());
        }
    }

    /**
     * This client's own loadFrom is announced to its watch before it is answered, and the
     * loaded messages become its copy: the reads after it need no call at all (they read the
     * whole history back before), and another client's change after it is still seen.
     */
    @Test
    void readsAfterAnOwnLoadFromNeedNoCall() throws Exception {
        String id = "coherent-载入-" + UUID.randomUUID();
        try (RemoteMemory memory = watching(id)) {
            RemoteMemory someoneElse = plain(id);
            memory.addMessage(text(MsgRole.USER, "载入之前"));
            memory.getMessages();
            until(memory::servesFromCache);
            List<Msg> saved = new ArrayList<>();
            for (int i = 0; i < 1500; i++) {
                saved.add(text(i % 2 == 0 ? MsgRole.USER : MsgRole.ASSISTANT, "第" + i + "句"));
            }
            InMemorySession session = new InMemorySession();
            SessionKey key = SimpleSessionKey.of("会话-" + UUID.randomUUID());
            session.save(key, RemoteMemory.MESSAGES_KEY, saved);

            memory.loadFrom(session, key);
            int before = reads.get();
            List<Msg> got = memory.getMessages();
            assertEquals(before, reads.get(), "served from the loaded copy");
            assertEquals(json(someoneElse.getMessages()), json(got));

            someoneElse.addMessage(text(MsgRole.ASSISTANT, "别人插话"));
            assertEquals(json(someoneElse.getMessages()), json(memory.getMessages()));
            assertEquals(before, reads.get(), "the announcement carried the message");
            someoneElse.deleteMessage(0);
            assertEquals(json(someoneElse.getMessages()), json(memory.getMessages()));
            assertEquals(before + 2, reads.get(), "the whole history, in two pages");
        }
    }

    @Test
    void aLostStreamFallsBackToConditionalReads() throws Exception {
        String id = "coherent-" + UUID.randomUUID();
        try (RemoteMemory memory = watching(id)) {
            RemoteMemory someoneElse = plain(id);
            memory.addMessage(text(MsgRole.USER, "hello"));
            memory.getMessages();
            until(memory::servesFromCache);
            // As a dropped connection would: the server sees the stream end, the client may not
            // yet. The next write waits until the client's lease is over.
            for (ClientCall<?, ?> call : watches) {
                call.cancel("connection lost (test)", null);
            }
            someoneElse.addMessage(text(MsgRole.USER, "theirs"));
            int before = reads.get();
            assertEquals(List.of("hello", "theirs"), texts(memory.getMessages()));
            assertEquals(before + 1, reads.get(), "a conditional read");
            // The watch opens again on a later read and the copy is trusted again.
            until(() -> {
                memory.getMessages();
                return memory.servesFromCache();
            });
            someoneElse.addMessage(text(MsgRole.USER, "again"));
            assertEquals(json(someoneElse.getMessages()), json(memory.getMessages()));
        }
    }

    @Test
    void anOwnAddWhoseAnswerWasLostIsSeenByTheNextRead() throws Exception {
        String id = "coherent-" + UUID.randomUUID();
        try (RemoteMemory memory = watching(id)) {
            memory.addMessage(text(MsgRole.USER, "hello"));
            memory.getMessages();
            until(memory::servesFromCache);
            // The first attempt (over the watch) is stored but the stream breaks before its
            // answer; the AddMessages sent instead loses its answer too; its retry is a replay
            // that cannot say what changed, and our own watch was not told (it was the writer's).
            breakWatchBeforeNextAddAnswer.set(true);
            loseNextAddAnswer.set(true);
            memory.addMessage(text(MsgRole.ASSISTANT, "stored once"));
            assertTrue(!breakWatchBeforeNextAddAnswer.get() && !loseNextAddAnswer.get(), "both answers were lost");
            assertEquals(List.of("hello", "stored once"), texts(memory.getMessages()));
            assertEquals(json(plain(id).getMessages()), json(memory.getMessages()));
        }
    }

    @Test
    void anAddOnAWatchThatBreaksBeforeItsAnswerIsSentAgainAsAddMessagesAndStoredOnce() throws Exception {
        String id = "coherent-" + UUID.randomUUID();
        try (RemoteMemory memory = watching(id)) {
            memory.addMessage(text(MsgRole.USER, "hello"));
            memory.getMessages();
            until(memory::servesFromCache);
            int unaryBefore = unaryAdds.get();
            breakWatchBeforeNextAddAnswer.set(true);
            memory.addMessage(text(MsgRole.ASSISTANT, "stored once"));
            assertTrue(!breakWatchBeforeNextAddAnswer.get(), "the add went over the watch");
            assertEquals(unaryBefore + 1, unaryAdds.get(), "then again as AddMessages (a replay)");
            assertEquals(List.of("hello", "stored once"), texts(memory.getMessages()));
            assertEquals(json(plain(id).getMessages()), json(memory.getMessages()));
            // The watch comes back and carries adds again.
            until(() -> {
                memory.getMessages();
                return memory.servesFromCache();
            });
            memory.addMessage(text(MsgRole.USER, "more"));
            assertEquals(unaryBefore + 1, unaryAdds.get());
            assertEquals(json(plain(id).getMessages()), json(memory.getMessages()));
        }
    }

    @Test
    void anAddOnTheWatchFailsWithTheExceptionsOfAddMessages() throws Exception {
        ManagedChannel own = null;
        try (TestServer server = TestServer.start(Map.of("AGENTSCOPE_MEMORY_MAX_MESSAGE_BYTES", "2000"));
                RemoteMemory unary = RemoteMemory.builder().target(server.target())
                        .memoryId("coherent-errors").build()) {
            own = Grpc.newChannelBuilder(server.target(), InsecureChannelCredentials.create()).build();
            RemoteMemory memory = RemoteMemory.builder().channel(observe(own))
                    .memoryId("coherent-errors").coherentCache(true).addConfirmation(AddConfirmation.EVERY_ADD).build();
            memory.addMessage(text(MsgRole.USER, "hello"));
            unary.addMessage(text(MsgRole.USER, "there"));
            memory.getMessages();
            until(memory::servesFromCache);
            Msg large = text(MsgRole.USER, "x".repeat(3000));
            int unaryBefore = unaryAdds.get();
            RemoteMemoryException overStream = assertThrows(RemoteMemoryException.class, () -> memory.addMessage(large));
            RemoteMemoryException asCall = assertThrows(RemoteMemoryException.class, () -> unary.addMessage(large));
            assertEquals(RemoteMemoryException.ResourceExhausted.class, overStream.getClass());
            assertEquals(asCall.getClass(), overStream.getClass());
            assertEquals(asCall.getMessage(), overStream.getMessage());
            assertEquals(unaryBefore, unaryAdds.get(), "the failed add went over the watch");

            // A memory deleted under the watch: NOT_FOUND, as AddMessages says.
            memory.getMessages();
            until(memory::servesFromCache);
            unary.getConnection().memoryService().deleteMemory(
                    DeleteMemoryRequest.newBuilder().setMemoryId("coherent-errors").build());
            unaryBefore = unaryAdds.get();
            RemoteMemoryException gone = assertThrows(RemoteMemoryException.class,
                    () -> memory.addMessage(text(MsgRole.USER, "late")));
            assertEquals(unaryBefore, unaryAdds.get(), "the failed add went over the watch");
            RemoteMemoryException goneAsCall = assertThrows(RemoteMemoryException.class,
                    () -> unary.addMessage(text(MsgRole.USER, "late")));
            assertEquals(RemoteMemoryException.NotFound.class, gone.getClass());
            assertEquals(goneAsCall.getMessage(), gone.getMessage());
            memory.close();
        } finally {
            if (own != null) {
                own.shutdownNow();
            }
        }
    }

    @Test
    void aServerWithoutCoherentCachingKeepsReadsConditional() throws Exception {
        try (TestServer server = TestServer.start(Map.of("AGENTSCOPE_MEMORY_COHERENT_CACHE", "false"));
                RemoteMemory memory = RemoteMemory.builder().target(server.target())
                        .memoryId("coherent-off").coherentCache(true).build();
                RemoteMemory someoneElse = RemoteMemory.builder().target(server.target())
                        .memoryId("coherent-off").build()) {
            memory.addMessage(text(MsgRole.USER, "hello"));
            for (int i = 0; i < 20; i++) {
                memory.getMessages();
                assertTrue(!memory.servesFromCache());
            }
            someoneElse.addMessage(text(MsgRole.USER, "theirs"));
            assertEquals(List.of("hello", "theirs"), texts(memory.getMessages()));
        }
    }
}
