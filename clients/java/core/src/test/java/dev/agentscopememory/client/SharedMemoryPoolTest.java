package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

/**
 * {@link SharedMemoryPool} against the real server: compare-and-set under concurrent writers,
 * events watched and resumed across a server crash, paging, Chinese keys and content, and bad
 * input answered with the field named.
 */
class SharedMemoryPoolTest {

    private static TestServer server;

    @BeforeAll
    static void startServer() throws Exception {
        server = TestServer.start();
    }

    @AfterAll
    static void stopServer() {
        server.close();
    }

    private static SharedMemoryPool pool(String poolId, String writer) {
        return SharedMemoryPool.builder().target(server.target()).deadline(Duration.ofSeconds(30))
                .poolId(poolId).writer(writer).build();
    }

    private static final Pattern COUNT = Pattern.compile("\"n\":\\s*(\\d+)");

    private static int count(SharedMemoryPool.Entry entry) {
        Matcher m = COUNT.matcher(entry.contentJson());
        assertTrue(m.find(), entry.contentJson());
        return Integer.parseInt(m.group(1));
    }

    @Test
    void closingThePoolEndsItsWatchesAtOnce() throws Exception {
        // An open watch held the channel's graceful shutdown (close() took 5 s), then was reopened
        // on the closed channel until the deadline and failed as if the server were unreachable.
        SharedMemoryPool pool = pool("关闭池-" + java.util.UUID.randomUUID(), "w");
        java.util.concurrent.BlockingQueue<SharedMemoryPool.Event> seen = new java.util.concurrent.LinkedBlockingQueue<>();
        java.util.concurrent.CompletableFuture<Throwable> ended = new java.util.concurrent.CompletableFuture<>();
        reactor.core.Disposable watching = pool.watch(0).subscribe(seen::add, ended::complete, () -> ended.complete(null));
        try {
            pool.write("k", "{\"n\": 1}").block();
            assertTrue(seen.poll(10, TimeUnit.SECONDS) != null, "the watch is open");
            long started = System.nanoTime();
            pool.close();
            long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
            assertTrue(tookMs < 2000, "close() took " + tookMs + " ms");
            assertEquals(null, ended.get(5, TimeUnit.SECONDS), "the watch completes when its pool is closed");
            // A watch asked for after close completes at once too.
            assertEquals(0L, (long) pool.watch(0).count().block(Duration.ofSeconds(5)));
        } finally {
            watching.dispose();
        }
    }

    @Test
    void compareAndSetUnderConcurrentWritersLosesNoUpdate() throws Exception {
        int writers = 6;
        int increments = 8;
        try (SharedMemoryPool setup = pool("并发池", "setup")) {
            assertEquals(1, setup.write("计数", "{\"n\": 0}", 0).block().entry().version());
            // A second create expecting absence loses to the first.
            PoolConflictException exists = assertThrows(PoolConflictException.class,
                    () -> setup.write("计数", "{\"n\": 0}", 0).block());
            assertEquals("并发池", exists.getPoolId());
            assertEquals("计数", exists.getKey());
            assertEquals(0, exists.getExpectedVersion());
            assertEquals(1, exists.getActualVersion());
            assertEquals(io.grpc.Status.Code.ABORTED, exists.getCode());
        }
        ExecutorService threads = Executors.newFixedThreadPool(writers);
        List<SharedMemoryPool> clients = new ArrayList<>();
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                SharedMemoryPool client = pool("并发池", "写手-" + w);
                clients.add(client);
                done.add(threads.submit(() -> {
                    for (int i = 0; i < increments; i++) {
                        while (true) {
                            SharedMemoryPool.Entry seen = client.get("计数").block();
                            try {
                                client.write("计数", "{\"n\": " + (count(seen) + 1) + "}", seen.version()).block();
                                break;
                            } catch (PoolConflictException lost) {
                                assertEquals("计数", lost.getKey());
                                assertEquals(seen.version(), lost.getExpectedVersion());
                                assertTrue(lost.getActualVersion() > seen.version(), lost.getMessage());
                            }
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(120, TimeUnit.SECONDS);
            }
        } finally {
            threads.shutdownNow();
            clients.forEach(SharedMemoryPool::close);
        }
        try (SharedMemoryPool check = pool("并发池", "check")) {
            SharedMemoryPool.Entry last = check.get("计数").block();
            assertEquals(writers * increments, count(last), "an increment was lost");
            assertEquals(1 + writers * increments, last.version());
            // Every successful write is one event with its own version: none overwrote another.
            List<Long> versions = check.listEvents(0).map(SharedMemoryPool.Event::version).collectList().block();
            assertEquals(LongRange.of(1, 1 + writers * increments), versions);

            // A delete expecting a stale version is refused, naming the versions; the right one deletes.
            PoolConflictException stale = assertThrows(PoolConflictException.class,
                    () -> check.delete("计数", 1L).block());
            assertEquals(1, stale.getExpectedVersion());
            assertEquals(last.version(), stale.getActualVersion());
            assertTrue(stale.getServerMessage().contains("计数"), stale.getServerMessage());
            assertEquals(last.version(), check.delete("计数", last.version()).block().deletedVersion());
            PoolConflictException absent = assertThrows(PoolConflictException.class,
                    () -> check.write("计数", "{}", 3).block());
            assertEquals(0, absent.getActualVersion());
        }
    }

    /** 1..n inclusive as a list. */
    private static final class LongRange {
        static List<Long> of(long from, long to) {
            return java.util.stream.LongStream.rangeClosed(from, to).boxed().toList();
        }
    }

    @Test
    void watchResumesAfterAServerCrashWithoutDuplicateOrGap() throws Exception {
        TestServer own = TestServer.start();
        TestServer restarted = null;
        BlockingQueue<SharedMemoryPool.Event> seen = new LinkedBlockingQueue<>();
        BlockingQueue<Throwable> failed = new LinkedBlockingQueue<>();
        try (RemoteConnection connection = RemoteConnection.builder().target(own.target())
                .deadline(Duration.ofSeconds(60)).build();
             SharedMemoryPool pool = SharedMemoryPool.builder().connection(connection).poolId("观察池")
                     .writer("记录员").build()) {
            for (int i = 1; i <= 3; i++) {
                pool.write("键" + i, "{\"值\": " + i + "}").block();
            }
            Disposable watching = pool.watch(0).subscribe(seen::add, failed::add);
            try {
                for (int i = 1; i <= 3; i++) {
                    SharedMemoryPool.Event e = seen.poll(30, TimeUnit.SECONDS);
                    assertNotNull(e, "event " + i + " did not arrive");
                    assertEquals(i, e.sequence());
                    assertEquals("键" + i, e.key());
                    assertEquals(SharedMemoryPool.WRITE_EVENT, e.type());
                    assertEquals("记录员", e.writer());
                }
                own.kill();
                restarted = TestServer.restart(own);
                // Writes are not retried: wait until the restarted server answers a read first.
                assertEquals(3, pool.listEntries("").count().block());
                pool.write("键4", "{\"值\": 4}").block();
                pool.delete("键1").block();
                pool.write("键2", "\"第二版\"").block();
                List<Long> after = new ArrayList<>();
                for (int i = 0; i < 3; i++) {
                    SharedMemoryPool.Event e = seen.poll(30, TimeUnit.SECONDS);
                    assertNotNull(e, "the watch did not resume: " + failed);
                    after.add(e.sequence());
                    if (e.sequence() == 5) {
                        assertTrue(e.isDelete());
                        assertEquals("键1", e.key());
                        assertEquals(1, e.version());
                    }
                }
                assertEquals(List.of(4L, 5L, 6L), after);
                assertNull(seen.poll(300, TimeUnit.MILLISECONDS), "an event was delivered twice");
                assertTrue(failed.isEmpty(), failed.toString());
            } finally {
                watching.dispose();
            }

            // A new subscription resumes from the last sequence the caller kept.
            List<SharedMemoryPool.Event> resumed = pool.watch(4).take(2).collectList().block(Duration.ofSeconds(30));
            assertEquals(List.of(5L, 6L), resumed.stream().map(SharedMemoryPool.Event::sequence).toList());
            assertEquals(2, pool.get("键2").block().version());
            assertEquals("\"第二版\"", pool.get("键2").block().contentJson());
        } finally {
            (restarted != null ? restarted : own).close();
        }
    }

    @Test
    void listingFollowsPagesAndKeepsKeyOrder() {
        try (SharedMemoryPool pool = SharedMemoryPool.builder().target(server.target()).poolId("分页池")
                .writer("作者").pageSize(7).build()) {
            for (int i = 0; i < 25; i++) {
                pool.write(String.format("任务/%02d", i), "{\"序号\": " + i + "}").block();
            }
            for (int i = 0; i < 4; i++) {
                pool.write("其他/" + i, "[]").block();
            }
            List<String> keys = pool.listEntries("任务/").map(SharedMemoryPool.Entry::key).collectList().block();
            assertEquals(IntStream.range(0, 25).mapToObj(i -> String.format("任务/%02d", i)).toList(), keys);
            assertEquals(29, pool.listEntries("").count().block());
            assertEquals(0, pool.listEntries("不存在/").count().block());
            // Taking a few reads only the pages needed, and the events page the same way.
            assertEquals(List.of("任务/00", "任务/01"),
                    pool.listEntries("任务/").take(2).map(SharedMemoryPool.Entry::key).collectList().block());
            assertEquals(LongRange.of(1, 29),
                    pool.listEvents(0).map(SharedMemoryPool.Event::sequence).collectList().block());
            assertEquals(LongRange.of(21, 29),
                    pool.listEvents(20).map(SharedMemoryPool.Event::sequence).collectList().block());
        }
    }

    @Test
    void chineseKeysContentMetadataAndRendering() {
        try (SharedMemoryPool pool = pool("团队·甲", "规划者");
             SharedMemoryPool other = pool("团队·乙", "编码者")) {
            String content = "{\"说明\":\"先读配置文件，再改代码 😀\"}";
            SharedMemoryPool.Written written = pool.write("计划：第一步", content, "{\"来源\":\"会议\"}", null).block();
            assertEquals(1, written.sequence());
            SharedMemoryPool.Entry entry = pool.get("计划：第一步").block();
            assertEquals(content, entry.contentJson());
            assertEquals("团队·甲", entry.poolId());
            assertEquals("规划者", entry.createdBy());
            assertTrue(entry.metadataJson().contains("会议"), entry.metadataJson());
            assertFalse(entry.updateTime().isBefore(entry.createTime()));
            assertNull(pool.find("没有这个键").block());
            other.write("代码：状态", "\"进行中\"").block();

            SharedMemoryPool.Rendering text = pool.renderContext(0).block();
            assertEquals(1, text.entryCount());
            assertTrue(text.text().startsWith("[SHARED:计划：第一步] "), text.text());
            assertTrue(text.text().contains("先读配置文件"), text.text());
            SharedMemoryPool.Rendering both = pool.renderContext(List.of("团队·甲", "团队·乙"), 0, true).block();
            assertEquals(2, both.entryCount());
            assertEquals(2, both.messages().size());
            assertEquals("", both.text());
            // Newest first: the other pool's entry was written last.
            assertTrue(both.messages().get(0).getContent(0).getText().getText().contains("代码：状态"),
                    both.messages().get(0).toString());
            SharedMemoryPool.Rendering tight = pool.renderContext(List.of("团队·甲", "团队·乙"), 5, false).block();
            assertTrue(tight.omittedCount() >= 1, tight.toString());
        }
    }

    @Test
    void poolsBelongToTheTenantOfTheApiKey() throws Exception {
        String keyA = "pool-key-a-0123456789abcdef";
        String keyB = "pool-key-b-0123456789abcdef";
        try (TestServer secured = TestServer.start(java.util.Map.of("AGENTSCOPE_MEMORY_API_KEYS",
                "{\"" + keyA + "\":\"tenant-a\",\"" + keyB + "\":\"tenant-b\"}"));
             SharedMemoryPool a = SharedMemoryPool.builder().target(secured.target()).apiKey(keyA).poolId("同名池").build();
             SharedMemoryPool b = SharedMemoryPool.builder().target(secured.target()).apiKey(keyB).poolId("同名池").build();
             SharedMemoryPool none = SharedMemoryPool.builder().target(secured.target()).poolId("同名池").build()) {
            a.write("秘密", "\"甲的\"").block();
            b.write("秘密", "\"乙的\"").block();
            b.write("只在乙", "1").block();
            assertEquals("\"甲的\"", a.get("秘密").block().contentJson());
            assertEquals(1, a.get("秘密").block().version());
            assertNull(a.find("只在乙").block());
            assertEquals(List.of("秘密"), a.listEntries("").map(SharedMemoryPool.Entry::key).collectList().block());
            // Each tenant's watch sees its own events only.
            assertEquals(List.of("秘密"), a.watch(0).take(1).map(SharedMemoryPool.Event::key).collectList()
                    .block(Duration.ofSeconds(30)));
            assertEquals(List.of(1L, 2L), b.watch(0).take(2).map(SharedMemoryPool.Event::sequence).collectList()
                    .block(Duration.ofSeconds(30)));
            assertInstanceOf(RemoteMemoryException.Unauthenticated.class,
                    assertThrows(RemoteMemoryException.class, () -> none.get("秘密").block()));
        }
    }

    /**
     * Half a surrogate pair has no UTF-8 form; protobuf sent '?' in its place, so a write to key
     * "计划\uD800" replaced the entry "计划?" and content came back with '?'. Refused before sending,
     * naming the field; the pool is unchanged.
     */
    @Test
    void aLoneSurrogateIsRefusedNamingTheFieldAndChangesNothing() {
        String poolId = "代理池-" + java.util.UUID.randomUUID();
        try (SharedMemoryPool pool = pool(poolId, "规划")) {
            pool.write("计划?", "{\"步骤\": 1}").block();
            IllegalArgumentException key = assertThrows(IllegalArgumentException.class,
                    () -> pool.write("计划\uD800", "{\"步骤\": 2}").block());
            assertEquals("key: contains a lone surrogate at character 2; it is not Unicode text", key.getMessage());
            IllegalArgumentException content = assertThrows(IllegalArgumentException.class,
                    () -> pool.write("计划?", "{\"步骤\": \"半\uDE00\"}").block());
            assertTrue(content.getMessage().startsWith("content_json: contains a lone surrogate at character 9"),
                    content.getMessage());
            assertTrue(assertThrows(IllegalArgumentException.class,
                    () -> pool.write("计划?", "{}", "{\"\uD83D\": 1}", null).block()).getMessage()
                    .startsWith("metadata_json: "));
            assertTrue(assertThrows(IllegalArgumentException.class, () -> pool.get("计划\uD800").block())
                    .getMessage().startsWith("key: "));
            assertTrue(assertThrows(IllegalArgumentException.class, () -> pool.delete("计划\uD800").block())
                    .getMessage().startsWith("key: "));
            assertTrue(assertThrows(IllegalArgumentException.class, () -> pool.listEntries("计\uD800").blockFirst())
                    .getMessage().startsWith("key_prefix: "));
            assertTrue(assertThrows(IllegalArgumentException.class,
                    () -> pool.renderContext(List.of(poolId, "池\uD800"), 0, false).block())
                    .getMessage().startsWith("pool_ids[1]: "));
            SharedMemoryPool.Entry kept = pool.get("计划?").block();
            assertEquals(1, kept.version());
            assertEquals("{\"步骤\": 1}", kept.contentJson());
            assertEquals(1, pool.listEvents(0).collectList().block().size());
        }
        assertTrue(assertThrows(IllegalArgumentException.class,
                () -> SharedMemoryPool.builder().target(server.target()).poolId("池\uD800").build())
                .getMessage().startsWith("pool_id: "));
        assertTrue(assertThrows(IllegalArgumentException.class,
                () -> SharedMemoryPool.builder().target(server.target()).poolId(poolId).writer("写\uDC00").build())
                .getMessage().startsWith("writer: "));
    }

    @Test
    void badInputIsRefusedNamingTheField() {
        try (SharedMemoryPool pool = pool("错误池", "测试")) {
            RemoteMemoryException noKey = assertThrows(RemoteMemoryException.class, () -> pool.write("", "{}").block());
            assertInstanceOf(RemoteMemoryException.InvalidArgument.class, noKey);
            assertTrue(noKey.getServerMessage().contains("key"), noKey.getMessage());
            RemoteMemoryException notJson = assertThrows(RemoteMemoryException.class,
                    () -> pool.write("键", "不是 JSON").block());
            assertInstanceOf(RemoteMemoryException.InvalidArgument.class, notJson);
            assertTrue(notJson.getServerMessage().contains("content_json"), notJson.getMessage());
            RemoteMemoryException badMetadata = assertThrows(RemoteMemoryException.class,
                    () -> pool.write("键", "{}", "[1]", null).block());
            assertTrue(badMetadata.getServerMessage().contains("metadata_json"), badMetadata.getMessage());
            RemoteMemoryException negative = assertThrows(RemoteMemoryException.class,
                    () -> pool.write("键", "{}", -1).block());
            assertInstanceOf(RemoteMemoryException.InvalidArgument.class, negative);
            assertTrue(negative.getServerMessage().contains("expected_version"), negative.getMessage());
            RemoteMemoryException missing = assertThrows(RemoteMemoryException.class, () -> pool.get("没有").block());
            assertInstanceOf(RemoteMemoryException.NotFound.class, missing);
            assertInstanceOf(RemoteMemoryException.NotFound.class,
                    assertThrows(RemoteMemoryException.class, () -> pool.delete("没有").block()));
            RemoteMemoryException budget = assertThrows(RemoteMemoryException.class,
                    () -> pool.renderContext(-1).block());
            assertTrue(budget.getServerMessage().contains("max_tokens"), budget.getMessage());
            RemoteMemoryException noPools = assertThrows(RemoteMemoryException.class,
                    () -> pool.renderContext(List.of(), 0, false).block());
            assertTrue(noPools.getServerMessage().contains("pool_ids"), noPools.getMessage());
            // A watch's bad input ends the stream at once (it is not retried).
            RemoteMemoryException longPool = assertThrows(RemoteMemoryException.class, () -> {
                try (SharedMemoryPool tooLong = pool("池".repeat(200), "")) {
                    tooLong.watch(0).blockFirst(Duration.ofSeconds(30));
                }
            });
            assertInstanceOf(RemoteMemoryException.InvalidArgument.class, longPool);
            assertTrue(longPool.getServerMessage().contains("pool_id"), longPool.getMessage());
        }
        IllegalArgumentException pageSize = assertThrows(IllegalArgumentException.class,
                () -> SharedMemoryPool.builder().pageSize(1001));
        assertTrue(pageSize.getMessage().startsWith("pageSize"), pageSize.getMessage());
        IllegalArgumentException noPool = assertThrows(IllegalArgumentException.class,
                () -> SharedMemoryPool.builder().target(server.target()).build());
        assertTrue(noPool.getMessage().startsWith("poolId"), noPool.getMessage());
        try (SharedMemoryPool pool = pool("错误池", "")) {
            assertThrows(IllegalArgumentException.class, () -> pool.watch(-1));
        }
    }
}
