package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.internal.WireEnums;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.GetMemoryRequest;
import dev.agentscopememory.grpc.v1.Memory;
import dev.agentscopememory.grpc.v1.MemoryServiceGrpc;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.nio.channels.ClosedChannelException;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The core alone, without any AgentScope on the classpath, against the real server. */
class RemoteConnectionTest {

    @Test
    void stubsCallTheServer() throws Exception {
        String memoryId = "core-" + UUID.randomUUID();
        try (RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            CreateMemoryRequest create = CreateMemoryRequest.newBuilder()
                    .setMemoryId(memoryId)
                    .setKind(WireEnums.toProto(MemoryKind.IN_MEMORY))
                    .build();
            assertTrue(connection.call("MemoryService/CreateMemory", false,
                    () -> connection.memoryService().createMemory(create)).getCreated());

            GetMemoryRequest get = GetMemoryRequest.newBuilder().setMemoryId(memoryId).build();
            Memory memory = connection.call("MemoryService/GetMemory", true,
                    () -> connection.memoryService().getMemory(get)).getMemory();
            assertEquals(dev.agentscopememory.grpc.v1.MemoryKind.MEMORY_KIND_IN_MEMORY, memory.getKind());
            assertEquals(0, memory.getMessageCount());
        }
    }

    /**
     * A connection opened from a target and dropped without close() would keep its socket open:
     * once collected, its channel is shut down. A channel given to a connection stays its owner's.
     */
    @Test
    void aConnectionCollectedWithoutCloseHasItsChannelShutDown() throws Exception {
        ManagedChannel owned = usedAndDropped();
        assertTrue(ConnectionProbe.collectUntil(owned::isShutdown, Duration.ofSeconds(30)),
                "the channel of a collected connection is still open");

        // A stub still in use holds its connection: its channel stays open.
        MemoryServiceGrpc.MemoryServiceBlockingStub stub = stubOfADroppedConnection();
        ManagedChannel collected = usedAndDropped();
        assertTrue(ConnectionProbe.collectUntil(collected::isShutdown, Duration.ofSeconds(30)));
        GetMemoryRequest get = GetMemoryRequest.newBuilder().setMemoryId("core-missing-" + UUID.randomUUID()).build();
        assertEquals(Status.Code.NOT_FOUND, assertThrows(io.grpc.StatusRuntimeException.class,
                () -> stub.withDeadlineAfter(20, TimeUnit.SECONDS).getMemory(get)).getStatus().getCode());

        ManagedChannel given = ManagedChannelBuilder.forTarget(TestServer.shared().target()).usePlaintext().build();
        try {
            dropConnectionOver(given);
            ManagedChannel probe = usedAndDropped();
            assertTrue(ConnectionProbe.collectUntil(probe::isShutdown, Duration.ofSeconds(30)));
            assertTrue(!given.isShutdown(), "a channel passed in was shut down by the connection's collection");
        } finally {
            given.shutdownNow();
        }
    }

    private static ManagedChannel usedAndDropped() throws Exception {
        RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target()).build();
        GetMemoryRequest get = GetMemoryRequest.newBuilder().setMemoryId("core-missing-" + UUID.randomUUID()).build();
        assertThrows(RemoteMemoryException.NotFound.class,
                () -> connection.call("MemoryService/GetMemory", true, () -> connection.memoryService().getMemory(get)));
        return ConnectionProbe.ownedChannel(connection);
    }

    private static MemoryServiceGrpc.MemoryServiceBlockingStub stubOfADroppedConnection() throws Exception {
        return RemoteConnection.builder().target(TestServer.shared().target()).build()
                .streamStub(MemoryServiceGrpc::newBlockingStub);
    }

    private static void dropConnectionOver(ManagedChannel channel) {
        RemoteConnection connection = RemoteConnection.builder().channel(channel).build();
        GetMemoryRequest get = GetMemoryRequest.newBuilder().setMemoryId("core-missing-" + UUID.randomUUID()).build();
        assertThrows(RemoteMemoryException.NotFound.class,
                () -> connection.call("MemoryService/GetMemory", true, () -> connection.memoryService().getMemory(get)));
    }

    @Test
    void failuresBecomeTypedExceptionsWithTheServersMessage() throws Exception {
        try (RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            GetMemoryRequest get = GetMemoryRequest.newBuilder().setMemoryId("core-missing-" + UUID.randomUUID()).build();
            RemoteMemoryException.NotFound e = assertThrows(RemoteMemoryException.NotFound.class,
                    () -> connection.call("MemoryService/GetMemory", true, () -> connection.memoryService().getMemory(get)));
            assertEquals("MemoryService/GetMemory", e.getOperation());
            assertTrue(!e.getServerMessage().isEmpty() && e.getMessage().contains(e.getServerMessage()), e.getMessage());
        }
    }

    @Test
    void aSafeCallCutOffByAClosedChannelIsTriedAgainButAnUnknownFailureIsNot() throws Exception {
        // A server killed while a call is being written surfaces in grpc-java as UNKNOWN caused by
        // Netty's ClosedChannelException, not as UNAVAILABLE.
        Status cutOff = Status.UNKNOWN.withDescription("channel closed").withCause(new ClosedChannelException());
        try (RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target()).build()) {
            AtomicInteger attempts = new AtomicInteger();
            String result = connection.call("MemoryService/GetMessages", true, () -> {
                if (attempts.incrementAndGet() == 1) {
                    throw cutOff.asRuntimeException();
                }
                return "read";
            });
            assertEquals("read", result);
            assertEquals(2, attempts.get());

            AtomicInteger unsafe = new AtomicInteger();
            // Not retried when unsafe, and reported as the server being unavailable.
            RemoteMemoryException lost = assertThrows(RemoteMemoryException.Unavailable.class,
                    () -> connection.call("MemoryService/AddMessages", false, () -> {
                        unsafe.incrementAndGet();
                        throw cutOff.asRuntimeException();
                    }));
            assertEquals(1, unsafe.get());
            assertTrue(lost.getMessage().contains("channel closed"), lost.getMessage());

            AtomicInteger serverError = new AtomicInteger();
            assertThrows(RemoteMemoryException.class, () -> connection.call("MemoryService/GetMessages", true, () -> {
                serverError.incrementAndGet();
                throw Status.UNKNOWN.withDescription("boom").asRuntimeException();
            }));
            assertEquals(1, serverError.get());
        }
    }

    /** {@code channel}, adding to {@code deadlines} the time each call starts with (ns left), as the server gets it. */
    private static Channel recordingDeadlines(Channel channel, List<Long> deadlines) {
        return ClientInterceptors.intercept(channel, new ClientInterceptor() {
            @Override
            public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
                    MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
                deadlines.add(options.getDeadline().timeRemaining(TimeUnit.NANOSECONDS));
                return next.newCall(method, options);
            }
        });
    }

    @Test
    void aCallMadeAfterItsDeadlinePassedFailsAtOnceWithoutReachingTheServer() throws Exception {
        String memoryId = "core-late-" + UUID.randomUUID();
        CreateMemoryRequest create = CreateMemoryRequest.newBuilder()
                .setMemoryId(memoryId).setKind(WireEnums.toProto(MemoryKind.IN_MEMORY)).build();
        ManagedChannel channel = ManagedChannelBuilder.forTarget(TestServer.shared().target()).usePlaintext().build();
        List<Long> deadlines = new CopyOnWriteArrayList<>();
        Channel recording = recordingDeadlines(channel, deadlines);
        // Connected first: on a busy machine dialling alone can take most of 300 ms.
        try (RemoteConnection warm = RemoteConnection.builder().channel(recording).deadline(Duration.ofSeconds(20)).build()) {
            warm.call("MemoryService/ListMemories", true, () -> warm.memoryService()
                    .listMemories(dev.agentscopememory.grpc.v1.ListMemoriesRequest.newBuilder().setPageSize(1).build()));
        }
        deadlines.clear();
        try (RemoteConnection connection = RemoteConnection.builder().channel(recording)
                .deadline(Duration.ofMillis(300)).build()) {
            connection.call("MemoryService/CreateMemory", false, () -> connection.memoryService().createMemory(create));
            assertTrue(deadlines.get(0) > 0, deadlines.toString());
            // A stub taken inside a call whose deadline has passed (its caller did slow work first)
            // gets no time at all: the call ends DEADLINE_EXCEEDED, started already expired, so
            // gRPC sends nothing (given even a millisecond, a local server might answer instead).
            RemoteMemoryException.DeadlineExceeded late = assertThrows(RemoteMemoryException.DeadlineExceeded.class,
                    () -> connection.call("MemoryService/CreateMemory", false, () -> {
                        sleep(350);
                        return connection.memoryService().createMemory(create);
                    }));
            assertEquals("MemoryService/CreateMemory", late.getOperation());
            assertEquals(2, deadlines.size());
            assertTrue(deadlines.get(1) <= 0, deadlines.toString());
        } finally {
            channel.shutdownNow();
        }
    }

    @Test
    void everyStubTakenInsideACallGetsOnlyWhatIsLeftOfItsDeadline() throws Exception {
        ManagedChannel channel = ManagedChannelBuilder.forTarget(TestServer.shared().target()).usePlaintext().build();
        List<Long> deadlines = new CopyOnWriteArrayList<>();
        Channel recording = recordingDeadlines(channel, deadlines);
        dev.agentscopememory.grpc.v1.GetValueRequest get = dev.agentscopememory.grpc.v1.GetValueRequest.newBuilder()
                .setSlot(dev.agentscopememory.grpc.v1.StateSlot.newBuilder().setSessionId("late-" + UUID.randomUUID()))
                .setKey("agent_state").build();
        try (RemoteConnection warm = RemoteConnection.builder().channel(recording).deadline(Duration.ofSeconds(20)).build();
                RemoteConnection connection = RemoteConnection.builder().channel(recording)
                        .deadline(Duration.ofMillis(300)).build()) {
            // Connected first, so the short deadline below is not spent dialling.
            warm.call("AgentStateService/GetValue", true, () -> warm.agentStateService().getValue(get));
            deadlines.clear();
            // An AgentStateService stub taken inside a call got the whole deadline again, so the
            // last attempt of a retried call could run nearly a deadline past the call's end.
            assertThrows(RemoteMemoryException.DeadlineExceeded.class,
                    () -> connection.call("AgentStateService/GetValue", true, () -> {
                        sleep(350);
                        return connection.agentStateService().getValue(get);
                    }));
            assertEquals(1, deadlines.size());
            assertTrue(deadlines.get(0) <= 0, deadlines.toString());
        } finally {
            channel.shutdownNow();
        }
    }

    @Test
    void aCallOnAClosedConnectionFailsAtOnceSayingSo() throws Exception {
        GetMemoryRequest get = GetMemoryRequest.newBuilder().setMemoryId("core-closed-" + UUID.randomUUID()).build();
        RemoteConnection connection = RemoteConnection.builder().target(TestServer.shared().target())
                .deadline(Duration.ofSeconds(20)).build();
        connection.close();
        AtomicInteger attempts = new AtomicInteger();
        long started = System.nanoTime();
        // gRPC answers a call on a shut-down channel UNAVAILABLE, the status it retries: without a
        // check, a safe call would be tried again for its whole deadline, for nothing.
        RemoteMemoryException.Unavailable closed = assertThrows(RemoteMemoryException.Unavailable.class,
                () -> connection.call("MemoryService/GetMemory", true, () -> {
                    attempts.incrementAndGet();
                    return connection.memoryService().getMemory(get);
                }));
        assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(2),
                "took " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) + " ms");
        assertTrue(attempts.get() <= 1, attempts + " attempts");
        assertEquals("MemoryService/GetMemory", closed.getOperation());
        assertTrue(closed.getMessage().contains("connection is closed"), closed.getMessage());

        // A channel passed in and shut down by its owner is the same.
        ManagedChannel channel = ManagedChannelBuilder.forTarget(TestServer.shared().target()).usePlaintext().build();
        RemoteConnection onChannel = RemoteConnection.builder().channel(channel).deadline(Duration.ofSeconds(20)).build();
        channel.shutdownNow();
        started = System.nanoTime();
        assertThrows(RemoteMemoryException.Unavailable.class,
                () -> onChannel.call("MemoryService/GetMemory", true, () -> onChannel.memoryService().getMemory(get)));
        assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(2),
                "took " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) + " ms");
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
