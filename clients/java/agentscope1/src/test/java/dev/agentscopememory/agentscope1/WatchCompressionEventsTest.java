package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import io.agentscope.core.memory.autocontext.AutoContextConfig;
import io.agentscope.core.memory.autocontext.CompressionEvent;
import io.agentscope.core.message.Msg;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/** {@link RemoteAutoContextMemory#watchCompressionEvents(long)} against a real server. */
class WatchCompressionEventsTest {

    private static TestServer server;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.start();
    }

    @AfterAll
    static void stop() {
        if (server != null) {
            server.close();
        }
    }

    /** reference/autocontext.md D7: one large message offloaded, no summariser needed. */
    private static final AutoContextConfig D7 = AutoContextConfig.builder()
            .msgThreshold(5).lastKeep(4).largePayloadThreshold(100).build();

    private static List<Msg> d7Input() {
        AutoContextHarness.Messages m = new AutoContextHarness.Messages();
        return List.of(m.u("a"), m.a("b"), m.u("y".repeat(300)), m.a("ok"), m.u("next"));
    }

    private RemoteAutoContextMemory memory() {
        return RemoteAutoContextMemory.builder().target(server.target())
                .memoryId("watch-" + UUID.randomUUID()).config(D7).build();
    }

    private static String json(CompressionEvent e) {
        return AutoContextHarness.events(List.of(e), new AutoContextHarness.Uuids()).toString()
                + e.getTimestamp() + e.getCompressedMessageId() + e.getMetadata();
    }

    @Test
    void closingTheMemoryEndsItsWatchesAtOnce() throws Exception {
        // An open watch kept the channel's graceful shutdown waiting: close() took 5 s, and the
        // subscriber got "UNAVAILABLE: Channel shutdownNow invoked", as if the server were down.
        RemoteAutoContextMemory memory = memory();
        java.util.concurrent.CompletableFuture<Throwable> ended = new java.util.concurrent.CompletableFuture<>();
        Disposable watching = memory.watchCompressionEvents(0)
                .subscribe(e -> { }, ended::complete, () -> ended.complete(null));
        try {
            memory.addMessages(d7Input());
            memory.compressIfNeeded(); // the watch is open: its first event arrives
            long started = System.nanoTime();
            memory.close();
            long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
            assertTrue(tookMs < 2000, "close() took " + tookMs + " ms");
            assertNull(ended.get(10, TimeUnit.SECONDS), "the watch completes when its memory is closed");
        } finally {
            watching.dispose();
        }
    }

    @Test
    void deliversEventsAsTheyAreRecordedThenReplaysFromASequence() throws Exception {
        try (RemoteAutoContextMemory memory = memory()) {
            BlockingQueue<SequencedCompressionEvent> live = new LinkedBlockingQueue<>();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Disposable watching = memory.watchCompressionEvents(0).subscribe(live::add, failure::set);
            try {
                memory.addMessages(d7Input());
                assertNull(live.poll(300, TimeUnit.MILLISECONDS), "no event before a compression");
                assertTrue(memory.compressIfNeeded());
                SequencedCompressionEvent event = live.poll(10, TimeUnit.SECONDS);
                assertEquals(1, event.sequence());
                assertEquals("LARGE_MESSAGE_OFFLOAD", event.event().getEventType());
                // the same event getCompressionEvents lists, field for field
                assertEquals(json(memory.getCompressionEvents().get(0)), json(event.event()));
                assertNull(failure.get());
            } finally {
                watching.dispose();
            }

            // Replays: 0 gives the recorded event first; 1 (already seen) gives nothing yet.
            SequencedCompressionEvent replayed = memory.watchCompressionEvents(0).blockFirst(Duration.ofSeconds(10));
            assertEquals(1, replayed.sequence());
            assertEquals(json(memory.getCompressionEvents().get(0)), json(replayed.event()));
            BlockingQueue<SequencedCompressionEvent> after = new LinkedBlockingQueue<>();
            Disposable second = memory.watchCompressionEvents(1).subscribe(after::add);
            try {
                assertNull(after.poll(1500, TimeUnit.MILLISECONDS));
                // ...and that silence came from a live watch: the next compression reaches it.
                memory.addMessages(d7Input());
                assertTrue(memory.compressIfNeeded());
                SequencedCompressionEvent next = after.poll(10, TimeUnit.SECONDS);
                assertEquals(2, next == null ? -1 : next.sequence());
            } finally {
                second.dispose();
            }
        }
    }

    @Test
    void cancellingStopsDelivery() throws Exception {
        try (RemoteAutoContextMemory memory = memory()) {
            BlockingQueue<SequencedCompressionEvent> seen = new LinkedBlockingQueue<>();
            Disposable watching = memory.watchCompressionEvents(0).subscribe(seen::add);
            // The watch is proven live first: it delivers the first compression's event.
            memory.addMessages(d7Input());
            assertTrue(memory.compressIfNeeded());
            SequencedCompressionEvent first = seen.poll(10, TimeUnit.SECONDS);
            assertEquals(1, first == null ? -1 : first.sequence());
            watching.dispose();
            memory.addMessages(d7Input());
            assertTrue(memory.compressIfNeeded());
            int recorded = memory.getCompressionEvents().size();
            assertTrue(recorded > 1, "the second compression recorded events: " + recorded);
            assertNull(seen.poll(1500, TimeUnit.MILLISECONDS));
        }
    }

    @Test
    void failuresArriveAsRemoteMemoryExceptions() {
        String plain = "plain-" + UUID.randomUUID();
        try (RemoteMemory memory = RemoteMemory.builder().target(server.target()).memoryId(plain).build()) {
            memory.getMessages(); // creates an IN_MEMORY memory
        }
        try (RemoteAutoContextMemory wrongKind = RemoteAutoContextMemory.builder().target(server.target())
                .memoryId(plain).config(D7).build()) {
            Throwable error = assertThrows(RuntimeException.class,
                    () -> wrongKind.watchCompressionEvents(0).blockFirst(Duration.ofSeconds(10)));
            assertInstanceOf(RemoteMemoryException.class, error, String.valueOf(error));
        }
        try (RemoteAutoContextMemory memory = memory()) {
            assertThrows(IllegalArgumentException.class, () -> memory.watchCompressionEvents(-1));
        }
    }
}
