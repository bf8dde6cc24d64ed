package dev.agentscopememory.agentscope1;

import static dev.agentscopememory.agentscope1.SampleMessages.texts;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.WatchMessagesRequest;
import dev.agentscopememory.grpc.v1.WatchMessagesResponse;
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
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Pipelined adds ({@code coherentCache(true).pipelinedAdds(true)}): adds return without waiting
 * for their answers and show in this client's reads at once; {@code flush()}, every other call
 * that reaches the server, and {@code close()} wait for them; a failed one is thrown by the next
 * call and drops the copy; adds whose stream broke are sent again once, in order. An add that does
 * not wait is held back a moment and goes out with the next add, as one, within the batch limits;
 * refused as one, its adds are sent again one by one.
 */
class PipelinedAddsTest {

    private static final ObjectMapper TREES = new ObjectMapper();

    private ManagedChannel channel;
    /** GetMessages calls the pipelining client made. */
    private final AtomicInteger reads = new AtomicInteger();
    /** AddMessages calls (unary) the pipelining client made. */
    private final AtomicInteger unaryAdds = new AtomicInteger();
    /** How many messages each add the pipelining client sent over a watch carried, in order. */
    private final List<Integer> streamAdds = new CopyOnWriteArrayList<>();
    /** The pipelining client's WatchMessages calls, to cut them as a lost connection would. */
    private final List<ClientCall<?, ?>> watches = new CopyOnWriteArrayList<>();
    /** Add answers held back from the client while {@link #holding} (all delivery under this lock). */
    private final List<Runnable> held = new ArrayList<>();
    private boolean holding;

    @BeforeEach
    void connect() throws Exception {
        channel = Grpc.newChannelBuilder(TestServer.shared().target(), InsecureChannelCredentials.create()).build();
    }

    @AfterEach
    void close() {
        channel.shutdownNow();
    }

    /** The channel with the client's calls counted and, while {@link #holding}, add answers held back. */
    private Channel observe(Channel channel) {
        Channel counted = CountedCalls.on(channel, Map.of("GetMessages", reads, "AddMessages", unaryAdds));
        return ClientInterceptors.intercept(counted, new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                ClientCall<Q, R> call = next.newCall(method, options);
                if (method.getFullMethodName().endsWith("/WatchMessages")) {
                    call = holdingAddAnswers(call);
                    watches.add(call);
                }
                return call;
            }
        });
    }

    private <Q, R> ClientCall<Q, R> holdingAddAnswers(ClientCall<Q, R> call) {
        return new ForwardingClientCall.SimpleForwardingClientCall<>(call) {
            @Override
            public void sendMessage(Q message) {
                if (message instanceof WatchMessagesRequest r && r.hasAdd()) {
                    streamAdds.add(r.getAdd().getMessagesCount());
                }
                super.sendMessage(message);
            }

            @Override
            public void start(Listener<R> listener, Metadata headers) {
                ClientCall<Q, R> self = this;
                super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                    @Override
                    public void onMessage(R message) {
                        synchronized (held) {
                            if (holding && message instanceof WatchMessagesResponse r && r.hasAdded()) {
                                held.add(() -> super.onMessage(message));
                                self.request(1); // the stream goes on meanwhile
                                return;
                            }
                            super.onMessage(message);
                        }
                    }

                    @Override
                    public void onClose(io.grpc.Status status, Metadata trailers) {
                        synchronized (held) {
                            held.clear(); // answers of a broken stream never arrive
                            super.onClose(status, trailers);
                        }
                    }
                }, headers);
            }
        };
    }

    private void hold() {
        synchronized (held) {
            holding = true;
        }
    }

    private int heldAnswers() {
        synchronized (held) {
            return held.size();
        }
    }

    /** Delivers the held answers, in order, and stops holding. */
    private void release() {
        synchronized (held) {
            holding = false;
            held.forEach(Runnable::run);
            held.clear();
        }
    }

    private RemoteMemory pipelined(Channel on, String id) {
        return RemoteMemory.builder().channel(observe(on)).memoryId(id).coherentCache(true).pipelinedAdds(true).build();
    }

    private RemoteMemory plain(String id) {
        return RemoteMemory.builder().channel(channel).memoryId(id).build();
    }

    private static Msg text(MsgRole role, String text) {
        return Msg.builder().role(role).name(role == MsgRole.USER ? "user" : "a").textContent(text).build();
    }

    private static JsonNode json(List<Msg> messages) throws Exception {
        return TREES.readTree(JsonUtils.getJsonCodec().toJson(messages));
    }

    /** Waits (at most 10 s) for something the background (watch, answers) brings about. */
    private static void until(BooleanSupplier condition) throws InterruptedException {
        for (int i = 0; i < 1000 && !condition.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertTrue(condition.getAsBoolean(), "not reached in time");
    }

    /** A pipelining memory with one message whose reads come from its copy. */
    private RemoteMemory started(Channel on, String id) throws InterruptedException {
        RemoteMemory memory = pipelined(on, id);
        memory.addMessage(text(MsgRole.USER, "hello"));
        memory.flush();
        memory.getMessages();
        until(memory::servesFromCache);
        return memory;
    }

    @Test
    void withoutCoherentCachingEveryAddWaitsAndThrowsItsOwnFailure() throws Exception {
        try (TestServer server = TestServer.start(Map.of("AGENTSCOPE_MEMORY_MAX_MESSAGE_BYTES", "2000"));
                RemoteMemory memory = RemoteMemory.builder().target(server.target()).memoryId("p-" + UUID.randomUUID())
                        .coherentCache(false).addConfirmation(AddConfirmation.ON_FLUSH).build()) {
            memory.addMessage(text(MsgRole.USER, "hello"));
            assertThrows(RemoteMemoryException.ResourceExhausted.class,
                    () -> memory.addMessage(text(MsgRole.USER, "x".repeat(3000))));
            assertEquals(List.of("hello"), texts(memory.getMessages()));
        }
    }

    @Test
    void ownAddsShowAtOnceAndFlushWaitsForTheirAnswers() throws Exception {
        String id = "pipelined-" + UUID.randomUUID();
        try (RemoteMemory memory = started(channel, id)) {
            hold();
            int sentBefore = streamAdds.size();
            memory.addMessage(text(MsgRole.ASSISTANT, "one"));
            memory.addMessages(List.of(text(MsgRole.USER, "two"), text(MsgRole.ASSISTANT, "three")));
            int readsBefore = reads.get();
            // Returned with no answer yet; this client's reads show the adds, with no call.
            assertEquals(List.of("hello", "one", "two", "three"), texts(memory.getMessages()));
            assertEquals(readsBefore, reads.get());
            // Gone out once their hold ran out (together or not), their answers held back.
            until(() -> !memory.holdsAnAdd());
            until(() -> heldAnswers() == streamAdds.size() - sentBefore);
            CompletableFuture<Void> flushed = CompletableFuture.runAsync(memory::flush);
            assertFalse(flushed.isDone(), "flush waits for the answers");
            release();
            flushed.get();
            assertEquals(json(plain(id).getMessages()), json(memory.getMessages()));
            assertTrue(memory.servesFromCache(), "the answers moved the adds into the copy");

            // Coherence unchanged: another client's write is seen by the next read.
            plain(id).addMessage(text(MsgRole.USER, "theirs"));
            memory.addMessage(text(MsgRole.ASSISTANT, "mine"));
            assertEquals(List.of("hello", "one", "two", "three", "theirs", "mine"), texts(memory.getMessages()));
            memory.flush();
            assertEquals(json(plain(id).getMessages()), json(memory.getMessages()));
        }
    }

    @Test
    void aReActAgentTurnStoresWhatInMemoryMemoryHolds() throws Exception {
        String id = "pipelined-" + UUID.randomUUID();
        try (RemoteMemory memory = started(channel, id)) {
            io.agentscope.core.memory.InMemoryMemory local = new io.agentscope.core.memory.InMemoryMemory();
            local.addMessage(text(MsgRole.USER, "hello"));
            MemoryTurnBenchmark.turn(local);
            MemoryTurnBenchmark.turn(memory);
            List<Msg> seen = memory.getMessages();
            memory.flush();
            assertEquals(json(plain(id).getMessages()), json(seen), "what it showed is what was stored");
            assertEquals(local.getMessages().size(), seen.size());
            for (int i = 0; i < seen.size(); i++) {
                assertEquals(local.getMessages().get(i).getRole(), seen.get(i).getRole());
            }
        }
    }

    @Test
    void aFailedAddIsThrownByTheNextCallWhichDropsTheCopy() throws Exception {
        ManagedChannel own = null;
        try (TestServer server = TestServer.start(Map.of("AGENTSCOPE_MEMORY_MAX_MESSAGE_BYTES", "2000"));
                RemoteMemory unary = RemoteMemory.builder().target(server.target()).memoryId("pipelined-errors").build()) {
            own = Grpc.newChannelBuilder(server.target(), InsecureChannelCredentials.create()).build();
            RemoteMemory memory = started(own, "pipelined-errors");
            Msg large = text(MsgRole.USER, "x".repeat(3000));
            RemoteMemoryException asCall = assertThrows(RemoteMemoryException.class, () -> unary.addMessage(large));

            memory.addMessage(large); // returns: the failure comes later
            until(() -> !memory.servesFromCache()); // its answer dropped the copy
            int readsBefore = reads.get();
            RemoteMemoryException next = assertThrows(RemoteMemoryException.class, memory::getMessages);
            assertEquals(RemoteMemoryException.ResourceExhausted.class, next.getClass());
            assertEquals(asCall.getMessage(), next.getMessage());
            // Thrown once; the next read is the server's.
            assertEquals(List.of("hello"), texts(memory.getMessages()));
            assertEquals(readsBefore + 1, reads.get());

            // Adds after a failed one are applied on their own; flush throws the failure. (Answers
            // held until both are sent: the failure, once in, would be thrown by the second add.)
            hold();
            memory.addMessage(large);
            memory.addMessage(text(MsgRole.ASSISTANT, "after"));
            release();
            RemoteMemoryException flushed = assertThrows(RemoteMemoryException.class, memory::flush);
            assertEquals(RemoteMemoryException.ResourceExhausted.class, flushed.getClass());
            assertEquals(List.of("hello", "after"), texts(memory.getMessages()));
            assertEquals(json(unary.getMessages()), json(memory.getMessages()));

            // Any other call that reaches the server flushes first, and throws.
            memory.addMessage(large);
            assertThrows(RemoteMemoryException.ResourceExhausted.class, memory::messageCount);
            memory.addMessage(large);
            assertThrows(RemoteMemoryException.ResourceExhausted.class, () -> memory.deleteMessage(0));
            assertEquals(List.of("hello", "after"), texts(unary.getMessages()), "the delete did not run");

            // close() flushes too.
            memory.addMessage(text(MsgRole.USER, "last"));
            memory.addMessage(large);
            assertThrows(RemoteMemoryException.ResourceExhausted.class, memory::close);
            assertEquals(List.of("hello", "after", "last"), texts(unary.getMessages()));
        } finally {
            if (own != null) {
                own.shutdownNow();
            }
        }
    }

    @Test
    void addsPendingOnABrokenStreamAreSentAgainOnceInOrder() throws Exception {
        String id = "pipelined-" + UUID.randomUUID();
        try (RemoteMemory memory = started(channel, id)) {
            // Stored, all three, but the answers are lost with the stream.
            hold();
            int unaryBefore = unaryAdds.get();
            // Each sent alone (its hold over before the next), so three adds are pending.
            for (String a : List.of("a1", "a2", "a3")) {
                memory.addMessage(text(a.equals("a2") ? MsgRole.USER : MsgRole.ASSISTANT, a));
                until(() -> !memory.holdsAnAdd());
            }
            until(() -> heldAnswers() == 3);
            watches.get(watches.size() - 1).cancel("connection lost (test)", null);
            until(() -> !memory.servesFromCache()); // the client knows the stream ended
            release();
            assertEquals(List.of("hello", "a1", "a2", "a3"), texts(memory.getMessages()));
            assertEquals(unaryBefore + 3, unaryAdds.get(), "sent again as AddMessages");
            assertEquals(json(plain(id).getMessages()), json(memory.getMessages()));

            // The stream breaks right after the adds went out: some may not have been applied.
            until(() -> {
                memory.getMessages();
                return memory.servesFromCache();
            });
            unaryBefore = unaryAdds.get();
            memory.addMessage(text(MsgRole.USER, "b1"));
            memory.addMessage(text(MsgRole.ASSISTANT, "b2"));
            watches.get(watches.size() - 1).cancel("connection lost (test)", null);
            until(() -> !memory.servesFromCache());
            memory.addMessage(text(MsgRole.USER, "b3")); // after b1 and b2, sent again first
            memory.flush();
            assertTrue(unaryAdds.get() > unaryBefore, "sent again as AddMessages");
            assertEquals(List.of("hello", "a1", "a2", "a3", "b1", "b2", "b3"), texts(plain(id).getMessages()));
            assertEquals(json(plain(id).getMessages()), json(memory.getMessages()));
        }
    }

    /** A memory with the default confirmation, its (empty) copy read and its watch open. */
    private RemoteMemory confirmingModelOutput(Channel on, String id) throws InterruptedException {
        return watched(RemoteMemory.builder().channel(observe(on)).memoryId(id).build());
    }

    /** {@code memory}, holding its adds back long enough that those a test sends together go together. */
    private static RemoteMemory holdingLong(RemoteMemory memory) {
        memory.holdNanos = TimeUnit.SECONDS.toNanos(30);
        return memory;
    }

    private static RemoteMemory watched(RemoteMemory memory) throws InterruptedException {
        memory.getMessages(); // creates it and opens the watch
        until(memory::servesFromCache);
        return memory;
    }

    @Test
    void anInputHeldBackGoesOutWithTheModelOutputAfterItAsOneAdd() throws Exception {
        String id = "held-" + UUID.randomUUID();
        try (RemoteMemory memory = holdingLong(confirmingModelOutput(channel, id))) {
            memory.addMessage(text(MsgRole.USER, "what time is it?"));
            assertTrue(memory.holdsAnAdd());
            assertEquals(List.of("what time is it?"), texts(memory.getMessages()), "a held add shows at once");
            memory.addMessage(text(MsgRole.ASSISTANT, "noon"));
            assertEquals(List.of(2), streamAdds, "one add, with both messages");
            assertFalse(memory.hasPendingAdds(), "the model output waited for both");
            assertEquals(List.of("what time is it?", "noon"), texts(plain(id).getMessages()));
            assertEquals(json(plain(id).getMessages()), json(memory.getMessages()));
        }
    }

    @Test
    void anAddHeldBackGoesOutAloneWhenNothingFollowsIt() throws Exception {
        String id = "held-" + UUID.randomUUID();
        try (RemoteMemory memory = confirmingModelOutput(channel, id)) {
            memory.addMessage(text(MsgRole.USER, "你好，我是小明"));
            // No further call from this client: the hold runs out and the add goes, and is stored.
            RemoteMemory other = plain(id);
            until(() -> texts(other.getMessages()).equals(List.of("你好，我是小明")));
            until(() -> !memory.hasPendingAdds());
            assertEquals(List.of(1), streamAdds);
        }
    }

    @Test
    void heldAddsGoTogetherOnlyWithinTheBatchLimit() throws Exception {
        String id = "held-" + UUID.randomUUID();
        try (RemoteMemory memory = holdingLong(watched(pipelined(channel, id)))) {
            List<Msg> first = new ArrayList<>();
            for (int i = 0; i < 400; i++) {
                first.add(text(MsgRole.USER, "first " + i));
            }
            List<Msg> second = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                second.add(text(MsgRole.USER, "second " + i));
            }
            memory.addMessages(first);
            memory.addMessages(second);
            memory.flush();
            // 600 messages would pass AbstractRemoteMemory.ADD_BATCH_MESSAGES (500): two adds.
            assertEquals(List.of(400, 200), streamAdds);
            assertEquals(600, plain(id).getMessages().size());
        }
    }

    @Test
    void aModelOutputSentWithARefusedInputIsStoredAsIfSentAlone() throws Exception {
        ManagedChannel own = null;
        try (TestServer server = TestServer.start(Map.of("AGENTSCOPE_MEMORY_MAX_MESSAGE_BYTES", "2000"))) {
            own = Grpc.newChannelBuilder(server.target(), InsecureChannelCredentials.create()).build();
            RemoteMemory unary = RemoteMemory.builder().target(server.target()).memoryId("held-refused").build();
            RemoteMemory memory = holdingLong(confirmingModelOutput(own, "held-refused"));
            memory.addMessage(text(MsgRole.TOOL, "x".repeat(3000))); // held, too large
            RemoteMemoryException thrown = assertThrows(RemoteMemoryException.class,
                    () -> memory.addMessage(text(MsgRole.ASSISTANT, "after the tool")));
            assertEquals(RemoteMemoryException.ResourceExhausted.class, thrown.getClass());
            // Sent together first, refused as a whole, then each alone: the input failed, the output is stored.
            assertEquals(2, streamAdds.get(0));
            assertEquals(List.of("after the tool"), texts(unary.getMessages()));
            assertEquals(json(unary.getMessages()), json(memory.getMessages()));
            memory.close();
            unary.close();
        } finally {
            if (own != null) {
                own.shutdownNow();
            }
        }
    }

    @Test
    void addsFromSeveralThreadsAreEachStoredOnceInTheOrderEachThreadMadeThem() throws Exception {
        String id = "held-" + UUID.randomUUID();
        try (RemoteMemory memory = confirmingModelOutput(channel, id)) {
            int threads = 4;
            int each = 60;
            ExecutorService pool = Executors.newFixedThreadPool(threads + 1);
            try {
                List<Future<?>> work = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    int thread = t;
                    work.add(pool.submit(() -> {
                        for (int i = 0; i < each; i++) {
                            // Inputs held back and model outputs that wait, interleaved across threads.
                            MsgRole role = i % 3 == 2 ? MsgRole.ASSISTANT : MsgRole.USER;
                            memory.addMessage(text(role, "线程" + thread + "-" + i));
                        }
                        return null;
                    }));
                }
                AtomicBoolean adding = new AtomicBoolean(true);
                Future<?> reader = pool.submit(() -> {
                    while (adding.get()) {
                        List<String> seen = texts(memory.getMessages());
                        assertEquals(seen.size(), new HashSet<>(seen).size(), "a read shows no message twice");
                    }
                    return null;
                });
                for (Future<?> w : work) {
                    w.get(60, TimeUnit.SECONDS);
                }
                adding.set(false);
                reader.get(60, TimeUnit.SECONDS);
            } finally {
                pool.shutdownNow();
            }
            memory.flush();
            List<String> stored = texts(plain(id).getMessages());
            assertEquals(threads * each, stored.size());
            assertEquals(stored.size(), new HashSet<>(stored).size(), "none stored twice");
            for (int t = 0; t < threads; t++) {
                String prefix = "线程" + t + "-";
                List<String> own = stored.stream().filter(x -> x.startsWith(prefix)).toList();
                for (int i = 0; i < each; i++) {
                    assertEquals(prefix + i, own.get(i));
                }
            }
            assertEquals(json(plain(id).getMessages()), json(memory.getMessages()));
            assertTrue(streamAdds.size() < threads * each, "some adds went together");
        }
    }

    @Test
    void anAddNotAnsweredWithinTheDeadlineIsThrownByTheNextCall() throws Exception {
        String id = "pipelined-" + UUID.randomUUID();
        try (RemoteMemory memory = RemoteMemory.builder().channel(observe(channel)).memoryId(id)
                .coherentCache(true).pipelinedAdds(true).deadline(Duration.ofMillis(300)).build()) {
            memory.addMessage(text(MsgRole.USER, "hello"));
            memory.flush();
            memory.getMessages();
            until(memory::servesFromCache);
            hold();
            memory.addMessage(text(MsgRole.ASSISTANT, "unanswered"));
            until(() -> heldAnswers() == 1);
            Thread.sleep(400); // past the deadline
            assertThrows(RemoteMemoryException.DeadlineExceeded.class, memory::getMessages);
            release();
            // It was stored (only its answer was late); the next read is the server's.
            assertEquals(List.of("hello", "unanswered"), texts(memory.getMessages()));
        }
    }
}
