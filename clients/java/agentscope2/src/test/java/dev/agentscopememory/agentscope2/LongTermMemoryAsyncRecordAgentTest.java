package dev.agentscopememory.agentscope2;

import static dev.agentscopememory.agentscope2.LongTermAgents.WAIT;
import static dev.agentscopememory.agentscope2.LongTermAgents.text;
import static dev.agentscopememory.agentscope2.LongTermAgents.texts;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.ListLongTermMemoriesRequest;
import dev.agentscopememory.grpc.v1.LongTermMemoryItem;
import dev.agentscopememory.grpc.v1.RecordRequest;
import dev.agentscopememory.grpc.v1.Scope;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.Agent;
import io.agentscope.core.agent.RuntimeContext;
import io.agentscope.core.event.AgentEvent;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.middleware.MiddlewareBase;
import io.agentscope.core.middleware.ReasoningInput;
import io.agentscope.core.state.AgentState;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;

/**
 * {@link RemoteLongTermMemoryMiddleware}'s record after the call on a real AgentScope-Java 2.0.0
 * ReActAgent with a scripted model and the real server: {@code asyncRecord(true)} (AgentScope's
 * {@code longTermMemoryAsyncRecord(true)}) against the default, close() with records in flight, and
 * what is recorded when the call's input is no longer in its slot's context.
 */
class LongTermMemoryAsyncRecordAgentTest {

    /** How long a held record is shown to hold back what waits for it. */
    private static final long HOLD_MS = 700;

    private static TestServer server;
    private static RemoteConnection connection;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
        connection = LongTermAgents.connect(server.target());
    }

    @AfterAll
    static void stop() {
        connection.close();
    }

    /** A call that takes a tool step: its slot gains the input, the step and the reply. */
    static ScriptedModel weatherModel() {
        return new ScriptedModel(List.of(
                List.of(text("我查一下北京的天气。"), new ToolUseBlock("c1", "get_weather", Map.of("city", "北京"),
                        "{\"city\":\"北京\"}", Map.of())),
                List.of(text("记住了，你住在成都。")),
                List.of(text("你住在成都。"))));
    }

    static ReActAgent agent(ScriptedModel model, MiddlewareBase... middlewares) {
        ReActAgent.Builder b = LongTermAgents.agent(model);
        for (MiddlewareBase m : middlewares) {
            b.middleware(m);
        }
        return b.build();
    }

    static CompletableFuture<Msg> callAsync(ReActAgent agent, String userId, String sessionId, String text) {
        return agent.call(List.of(Scripts.user(text)), RuntimeContext.builder().userId(userId).sessionId(sessionId)
                .build()).toFuture();
    }

    static Msg call(ReActAgent agent, String userId, String sessionId, String text) throws Exception {
        // Bounded well below a held record's wait, so a call waiting for its record fails here.
        return callAsync(agent, userId, sessionId, text).get(30, TimeUnit.SECONDS);
    }

    static List<String> memories(String userId) {
        return LongTermAgents.memories(connection, "Assistant", userId);
    }

    static RemoteLongTermMemoryMiddleware.Builder middleware(Channel channel) {
        return RemoteLongTermMemoryMiddleware.builder().channel(channel).deadline(Duration.ofSeconds(120));
    }

    /**
     * Holds every {@code Record} call (before its request leaves) until {@link #release} is
     * counted down, keeping what each sends and counting those the server answered OK.
     */
    static final class HeldRecords implements ClientInterceptor {
        final CountDownLatch release = new CountDownLatch(1);
        final List<RecordRequest> sent = new CopyOnWriteArrayList<>();
        final AtomicInteger answered = new AtomicInteger();

        @Override
        public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
            return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                private boolean record;

                @Override
                public void start(Listener<R> listener, Metadata headers) {
                    super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                        @Override
                        public void onClose(Status status, Metadata trailers) {
                            if (record && status.isOk()) {
                                answered.incrementAndGet();
                            }
                            super.onClose(status, trailers);
                        }
                    }, headers);
                }

                @Override
                public void sendMessage(Q message) {
                    if (message instanceof RecordRequest r) {
                        record = true;
                        sent.add(r);
                        try {
                            release.await(WAIT.toSeconds(), TimeUnit.SECONDS);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                    super.sendMessage(message);
                }
            };
        }

        /** Waits until {@code n} Record calls have reached the hold. */
        void awaitSent(int n) throws InterruptedException {
            long end = System.nanoTime() + WAIT.toNanos();
            while (sent.size() < n && System.nanoTime() < end) {
                Thread.sleep(10);
            }
            assertEquals(n, sent.size(), "Record calls held");
        }

        /** Waits until {@code n} Record calls have been answered OK. */
        void awaitAnswered(int n) throws InterruptedException {
            long end = System.nanoTime() + WAIT.toNanos();
            while (answered.get() < n && System.nanoTime() < end) {
                Thread.sleep(10);
            }
            assertEquals(n, answered.get(), "Record calls answered");
        }
    }

    @Test
    void theDefaultCallReturnsOnlyAfterItsRecord() throws Exception {
        String user = "张三-" + UUID.randomUUID();
        HeldRecords held = new HeldRecords();
        ManagedChannel channel = server.channel();
        try (RemoteLongTermMemoryMiddleware ltm = middleware(ClientInterceptors.intercept(channel, held)).build()) {
            ReActAgent agent = agent(weatherModel(), ltm);
            CompletableFuture<Msg> reply = callAsync(agent, user, "会话-1", "我住在成都，北京天气如何？");
            held.awaitSent(1);
            Thread.sleep(HOLD_MS);
            assertFalse(reply.isDone(), "the call returned before its record");
            held.release.countDown();
            assertEquals("记住了，你住在成都。", reply.get(WAIT.toSeconds(), TimeUnit.SECONDS).getTextContent());
            // Stored by the time the call returns.
            assertEquals(1, held.answered.get());
            assertEquals(Set.of("我住在成都，北京天气如何？", "我查一下北京的天气。", "记住了，你住在成都。"),
                    Set.copyOf(memories(user)));
        } finally {
            held.release.countDown();
            channel.shutdownNow();
        }
    }

    @Test
    void anAsyncRecordLetsTheCallReturnAndRecordsWhatTheCallAdded() throws Exception {
        String user = "张三-" + UUID.randomUUID();
        HeldRecords held = new HeldRecords();
        ManagedChannel channel = server.channel();
        try (RemoteLongTermMemoryMiddleware ltm = middleware(ClientInterceptors.intercept(channel, held))
                .asyncRecord(true).build()) {
            ReActAgent agent = agent(weatherModel(), ltm);
            Msg first = call(agent, user, "会话-1", "我住在成都，北京天气如何？");
            assertEquals("记住了，你住在成都。", first.getTextContent());
            // The call returned while its record is pending: nothing stored yet.
            assertEquals(0, held.answered.get());
            assertEquals(List.of(), memories(user));

            // A second call in the same session while the first record is still held: the first
            // record holds what its call added when it ended, not the session's later messages.
            Msg second = call(agent, user, "会话-1", "我住在哪里？");
            assertEquals("你住在成都。", second.getTextContent());
            held.awaitSent(2);
            assertEquals(0, held.answered.get());
            assertEquals(List.of(), memories(user));

            held.release.countDown();
            held.awaitAnswered(2);
            // Exactly what the synchronous path sends (the test above stores these three).
            Map<String, List<String>> byFirst = held.sent.stream().map(LongTermAgents::texts)
                    .collect(Collectors.toMap(t -> t.get(0), t -> t));
            assertEquals(Map.of(
                    "我住在成都，北京天气如何？", List.of("我住在成都，北京天气如何？", "我查一下北京的天气。", "记住了，你住在成都。"),
                    "我住在哪里？", List.of("我住在哪里？", "你住在成都。")), byFirst);
            assertEquals(user, held.sent.get(0).getScope().getUserId());
            assertEquals(Set.of("我住在成都，北京天气如何？", "我查一下北京的天气。", "记住了，你住在成都。", "我住在哪里？", "你住在成都。"),
                    Set.copyOf(memories(user)));
        } finally {
            held.release.countDown();
            channel.shutdownNow();
        }
    }

    @Test
    void closeWaitsForAnAsyncRecordInFlight() throws Exception {
        String user = "张三-" + UUID.randomUUID();
        HeldRecords held = new HeldRecords();
        ManagedChannel channel = server.channel();
        try {
            RemoteLongTermMemoryMiddleware ltm = middleware(ClientInterceptors.intercept(channel, held))
                    .asyncRecord(true).build();
            ReActAgent agent = agent(weatherModel(), ltm);
            call(agent, user, "会话-1", "我住在成都，北京天气如何？");
            held.awaitSent(1);
            CompletableFuture<Void> closed = CompletableFuture.runAsync(ltm::close);
            Thread.sleep(HOLD_MS);
            assertFalse(closed.isDone(), "close() returned with a record in flight");
            held.release.countDown();
            closed.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            // Stored by the time close() returns.
            assertEquals(1, held.answered.get());
            assertEquals(3, memories(user).size(), memories(user).toString());
        } finally {
            held.release.countDown();
            channel.shutdownNow();
        }
    }

    @Test
    void closeWaitsForRecordsInFlightOnlyAsLongAsItsBound() throws Exception {
        String user = "张三-" + UUID.randomUUID();
        HeldRecords held = new HeldRecords();
        ManagedChannel channel = server.channel();
        try {
            RemoteLongTermMemoryMiddleware ltm = middleware(ClientInterceptors.intercept(channel, held))
                    .asyncRecord(true).closeWait(Duration.ofSeconds(1)).build();
            ReActAgent agent = agent(weatherModel(), ltm);
            call(agent, user, "会话-1", "我住在成都，北京天气如何？");
            held.awaitSent(1);
            long start = System.nanoTime();
            CompletableFuture.runAsync(ltm::close).get(20, TimeUnit.SECONDS);
            long waitedMs = (System.nanoTime() - start) / 1_000_000;
            assertTrue(waitedMs >= 900, "close() waited " + waitedMs + " ms");
            assertEquals(0, held.answered.get());
            // The shared channel stays open: the record still ends once let go.
            held.release.countDown();
            held.awaitAnswered(1);
        } finally {
            held.release.countDown();
            channel.shutdownNow();
        }
    }

    @Test
    void failOnErrorDoesNotApplyToAnAsyncRecord() throws Exception {
        // A reply with half a surrogate pair: its record fails in the client, before any call.
        String broken = "好的\uD83D";
        String user = "张三-" + UUID.randomUUID();
        try (RemoteLongTermMemoryMiddleware strict = RemoteLongTermMemoryMiddleware.builder().connection(connection)
                .failOnError(true).build()) {
            ReActAgent agent = agent(new ScriptedModel(List.of(List.of(text(broken)))), strict);
            Exception failed = assertThrows(Exception.class,
                    () -> call(agent, user, "会话-1", "你好"));
            assertTrue(String.valueOf(failed.getMessage()).contains("lone surrogate"), String.valueOf(failed));
        }
        RemoteLongTermMemoryMiddleware async = RemoteLongTermMemoryMiddleware.builder().connection(connection)
                .failOnError(true).asyncRecord(true).build();
        ReActAgent agent = agent(new ScriptedModel(List.of(List.of(text(broken)))), async);
        // The call has ended when the record fails: logged at WARN, the call's reply given.
        assertEquals(broken, call(agent, user, "会话-2", "你好").getTextContent());
        // The failed record is no longer in flight: close() does not wait out its bound.
        long start = System.nanoTime();
        async.close();
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(10), "close() waited for a failed record");
        assertEquals(List.of(), memories(user));
    }

    /**
     * Replaces the slot's context with one summary message before the call's second reasoning
     * step, as a compaction during the call would.
     */
    static final class Compactor implements MiddlewareBase {
        static final String SUMMARY = "摘要：用户问了北京的天气。";
        private final AtomicInteger steps = new AtomicInteger();

        @Override
        public Flux<AgentEvent> onReasoning(Agent agent, RuntimeContext ctx, ReasoningInput input,
                Function<ReasoningInput, Flux<AgentEvent>> next) {
            if (steps.incrementAndGet() == 2) {
                AgentState state = RuntimeContext.resolveAgentState(ctx, agent);
                List<Msg> context = state.contextMutable();
                context.clear();
                context.add(Msg.builder().role(MsgRole.USER).name("summary").textContent(SUMMARY).build());
            }
            return next.apply(input);
        }
    }

    @Test
    void aCallWhoseInputWasCompactedAwayRecordsItsInputAndReply() throws Exception {
        String user = "张三-" + UUID.randomUUID();
        // A memory to inject, so that the record can be seen to leave it out.
        try (RemoteLongTermMemory earlier = RemoteLongTermMemory.builder().connection(connection)
                .agentName("Assistant").userId(user).build()) {
            earlier.record(List.of(Scripts.user("我住在成都。"))).block(WAIT);
        }
        HeldRecords held = new HeldRecords();
        held.release.countDown();
        ManagedChannel channel = server.channel();
        try (RemoteLongTermMemoryMiddleware ltm = middleware(ClientInterceptors.intercept(channel, held)).build()) {
            ScriptedModel model = weatherModel();
            // The compactor inside the middleware, as the agent runs them in the order given.
            ReActAgent agent = agent(model, ltm, new Compactor());
            Msg reply = call(agent, user, "会话-1", "北京天气如何？");
            assertEquals("记住了，你住在成都。", reply.getTextContent());

            // The memory was injected, and the call's input is gone from its slot.
            List<Msg> firstSeen = model.calls().get(0);
            Msg injected = firstSeen.get(firstSeen.size() - 1);
            assertTrue(RemoteLongTermMemoryMiddleware.MEMORY_MSG_NAME.equals(injected.getName())
                    && injected.getTextContent().contains("我住在成都。"), firstSeen.toString());
            List<Msg> context = agent.getAgentState(user, "会话-1").getContext();
            assertEquals(Compactor.SUMMARY, context.get(0).getTextContent());
            assertFalse(context.stream().anyMatch(m -> "北京天气如何？".equals(m.getTextContent())), context.toString());

            // Recorded: the input and the reply; not the summary, the injected memory, nor the
            // step the compaction took away.
            assertEquals(1, held.sent.size());
            assertEquals(List.of("北京天气如何？", "记住了，你住在成都。"), texts(held.sent.get(0)));
            assertEquals(Set.of("我住在成都。", "北京天气如何？", "记住了，你住在成都。"), Set.copyOf(memories(user)));
        } finally {
            channel.shutdownNow();
        }
    }
}
