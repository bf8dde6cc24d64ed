package dev.agentscopememory.client;

import com.google.protobuf.Timestamp;
import dev.agentscopememory.client.internal.Utf16;
import dev.agentscopememory.grpc.v1.DeletePoolEntryRequest;
import dev.agentscopememory.grpc.v1.DeletePoolEntryResponse;
import dev.agentscopememory.grpc.v1.GetPoolEntryRequest;
import dev.agentscopememory.grpc.v1.ListPoolEntriesRequest;
import dev.agentscopememory.grpc.v1.ListPoolEntriesResponse;
import dev.agentscopememory.grpc.v1.ListPoolEventsRequest;
import dev.agentscopememory.grpc.v1.ListPoolEventsResponse;
import dev.agentscopememory.grpc.v1.Msg;
import dev.agentscopememory.grpc.v1.PoolRenderFormat;
import dev.agentscopememory.grpc.v1.RenderPoolContextRequest;
import dev.agentscopememory.grpc.v1.RenderPoolContextResponse;
import dev.agentscopememory.grpc.v1.SharedPoolServiceGrpc;
import dev.agentscopememory.grpc.v1.WatchPoolEventsRequest;
import dev.agentscopememory.grpc.v1.WatchPoolEventsResponse;
import dev.agentscopememory.grpc.v1.WritePoolEntryRequest;
import dev.agentscopememory.grpc.v1.WritePoolEntryResponse;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Schedulers;
import reactor.util.retry.Retry;

/**
 * One shared memory pool on an agentscope-memory server (Loom's shared memory pool): versioned
 * key to JSON entries several agents read and write, and the pool's change events, through
 * {@code SharedPoolService}. A pool is named by any id within the caller's tenant (Chinese
 * included) and exists once written to.
 *
 * <p>{@link #write(String, String)} is last-writer-wins; {@link #write(String, String, long)} is a
 * compare-and-set that fails with {@link PoolConflictException} (key, expected and actual
 * version) when another writer got there first. {@link #listEntries} follows the pages for the
 * caller; {@link #watch} streams the events after a sequence number and, when the connection
 * drops, reopens the stream after the last event it delivered, so a subscriber sees every event
 * once, in order. Writes and deletes are not retried (a repeated write would add a version);
 * reads are retried while the server is unreachable, within the connection's deadline.
 *
 * <pre>{@code
 * try (SharedMemoryPool pool = SharedMemoryPool.builder().target("127.0.0.1:50051")
 *         .poolId("团队").writer("planner").build()) {
 *     SharedMemoryPool.Entry plan = pool.write("计划", "{\"step\":1}").block().entry();
 *     pool.write("计划", "{\"step\":2}", plan.version()).block(); // PoolConflictException if it moved
 *     pool.watch(0).subscribe(event -> log.info("{} {} v{}", event.type(), event.key(), event.version()));
 *     String context = pool.renderContext(2000).block().text();
 * }
 * }</pre>
 *
 * <p>Every {@code Mono} and {@code Flux} is cold: nothing is sent until it is subscribed, and
 * each subscription sends again. The blocking gRPC calls run on Reactor's bounded-elastic
 * scheduler; watched events arrive on gRPC's threads.
 */
public final class SharedMemoryPool implements AutoCloseable {

    /** Trailing metadata of a refused compare-and-set: the entry's version that won (0: absent). */
    public static final Metadata.Key<String> CURRENT_VERSION_KEY =
            Metadata.Key.of("agentscope-memory-current-version", Metadata.ASCII_STRING_MARSHALLER);

    /** The event type of a write. */
    public static final String WRITE_EVENT = "shared_pool.write";

    /** The event type of a delete. */
    public static final String DELETE_EVENT = "shared_pool.delete";

    /** A watch stream that had lived this long was connected: its loss starts a new outage. */
    private static final Duration CONNECTED = Duration.ofSeconds(1);

    private static final Duration FIRST_RESUME_WAIT = Duration.ofMillis(50);
    private static final Duration LONGEST_RESUME_WAIT = Duration.ofMillis(500);

    private final RemoteConnection connection;
    private final boolean ownsConnection;
    /** Emits once, at {@link #close()}: every watch of this pool completes then. */
    private final Sinks.One<Boolean> closing = Sinks.one();
    private final String poolId;
    private final String writer;
    private final int pageSize;

    private SharedMemoryPool(Builder b) {
        if (b.poolId == null || b.poolId.isEmpty()) {
            throw new IllegalArgumentException("poolId: is required");
        }
        // protobuf would send '?' for half a surrogate pair: another pool, another writer.
        this.poolId = Utf16.checkText(b.poolId, "pool_id");
        this.writer = Utf16.checkText(b.writer, "writer");
        this.pageSize = b.pageSize;
        this.ownsConnection = !b.sharesConnection();
        this.connection = b.connectionOrOpen();
    }

    /** A builder: the connection options, then {@link Builder#poolId} (required). */
    public static Builder builder() {
        return new Builder();
    }

    /** The pool's id. */
    public String poolId() {
        return poolId;
    }

    /**
     * One entry of the pool.
     *
     * @param poolId the pool
     * @param key the entry's key
     * @param contentJson the content, one JSON document as written
     * @param version 1 when created, one more with each write; a deleted key written again goes on from
     *     the version it was deleted at, so a version of a key never repeats
     * @param createdBy the writer that created it
     * @param updatedBy the writer of the last write
     * @param createTime when it was created
     * @param updateTime when it was last written
     * @param metadataJson a JSON object: every write's metadata merged in
     */
    public record Entry(String poolId, String key, String contentJson, long version, String createdBy,
                        String updatedBy, Instant createTime, Instant updateTime, String metadataJson) {}

    /**
     * A write done.
     *
     * @param entry the entry as written
     * @param sequence the sequence number of the write's event
     */
    public record Written(Entry entry, long sequence) {}

    /**
     * A delete done.
     *
     * @param deletedVersion the version the entry had
     * @param sequence the sequence number of the delete's event
     */
    public record Deleted(long deletedVersion, long sequence) {}

    /**
     * One change of the pool.
     *
     * @param sequence the pool's sequence number of the change: 1, 2, 3, ... in commit order
     * @param type {@link #WRITE_EVENT} or {@link #DELETE_EVENT}
     * @param poolId the pool
     * @param key the key written or deleted
     * @param version the entry's version after a write, or the version deleted
     * @param writer the writer the call named
     * @param time when the change was committed
     */
    public record Event(long sequence, String type, String poolId, String key, long version, String writer,
                        Instant time) {
        /** Whether the change deleted the key. */
        public boolean isDelete() {
            return DELETE_EVENT.equals(type);
        }
    }

    /**
     * Pools' entries rendered for a model call, newest first, within a token budget.
     *
     * @param text the lines {@code [SHARED:key] content}, joined by newlines (empty when messages were asked for)
     * @param messages one SYSTEM message per entry when asked for (empty otherwise)
     * @param entryCount how many entries were rendered
     * @param omittedCount how many were left out for the budget
     * @param tokenCount the tokens the rendering takes
     */
    public record Rendering(String text, List<Msg> messages, int entryCount, int omittedCount, int tokenCount) {}

    private SharedPoolServiceGrpc.SharedPoolServiceBlockingStub pools() {
        return connection.stub(SharedPoolServiceGrpc::newBlockingStub);
    }

    private static <T> Mono<T> blocking(Callable<T> call) {
        return Mono.fromCallable(call).subscribeOn(Schedulers.boundedElastic());
    }

    // ---------------------------------------------------------------- entries

    /**
     * Writes an entry, last writer wins: creates it at version 1 (a deleted key at the version it was
     * deleted at + 1) or replaces its content.
     *
     * @param key the key (any Unicode text of 1-1024 bytes of UTF-8)
     * @param contentJson one JSON document (any JSON value), at most 1 MiB
     * @return the entry as written and its event's sequence number
     */
    public Mono<Written> write(String key, String contentJson) {
        return write(key, contentJson, null, null);
    }

    /**
     * Writes an entry only if it is at {@code expectedVersion} (0: only if it does not exist).
     *
     * @param key the key
     * @param contentJson one JSON document
     * @param expectedVersion the version the caller read
     * @return the entry as written; fails with {@link PoolConflictException} when it is at another version
     */
    public Mono<Written> write(String key, String contentJson, long expectedVersion) {
        return write(key, contentJson, null, expectedVersion);
    }

    /**
     * Writes an entry, merging {@code metadataJson} into its metadata.
     *
     * @param key the key
     * @param contentJson one JSON document
     * @param metadataJson a JSON object merged into the entry's metadata, or {@code null}
     * @param expectedVersion compare-and-set against this version, or {@code null} for last-writer-wins
     * @return the entry as written; fails with {@link PoolConflictException} when a compare-and-set lost
     */
    public Mono<Written> write(String key, String contentJson, String metadataJson, Long expectedVersion) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(contentJson, "contentJson");
        // protobuf would send '?' for half a surrogate pair: the write would replace another key's entry.
        Utf16.checkText(key, "key");
        Utf16.checkText(contentJson, "content_json");
        if (metadataJson != null) {
            Utf16.checkText(metadataJson, "metadata_json");
        }
        String operation = "SharedPoolService/WritePoolEntry";
        return blocking(() -> {
            WritePoolEntryRequest.Builder request = WritePoolEntryRequest.newBuilder().setPoolId(poolId).setKey(key)
                    .setContentJson(contentJson).setWriter(writer)
                    .setMetadataJson(metadataJson == null ? "" : metadataJson);
            if (expectedVersion != null) {
                request.setExpectedVersion(expectedVersion);
            }
            WritePoolEntryRequest built = request.build();
            try {
                WritePoolEntryResponse r = connection.call(operation, false, () -> pools().writePoolEntry(built));
                return new Written(entry(r.getEntry()), r.getSequence());
            } catch (RemoteMemoryException e) {
                throw conflictOr(e, key, expectedVersion);
            }
        });
    }

    /**
     * Reads one entry.
     *
     * @param key the key
     * @return the entry; fails with {@link RemoteMemoryException.NotFound} when the pool holds no such key
     */
    public Mono<Entry> get(String key) {
        Utf16.checkText(Objects.requireNonNull(key, "key"), "key");
        return blocking(() -> {
            GetPoolEntryRequest request = GetPoolEntryRequest.newBuilder().setPoolId(poolId).setKey(key).build();
            return entry(connection.call("SharedPoolService/GetPoolEntry", true,
                    () -> pools().getPoolEntry(request)).getEntry());
        });
    }

    /**
     * Reads one entry, or nothing when the pool holds no such key.
     *
     * @param key the key
     * @return the entry, or an empty {@code Mono}
     */
    public Mono<Entry> find(String key) {
        return get(key).onErrorResume(RemoteMemoryException.NotFound.class, e -> Mono.empty());
    }

    /**
     * Deletes one entry, whatever its version.
     *
     * @param key the key
     * @return the version deleted; fails with {@link RemoteMemoryException.NotFound} when there is no such key
     */
    public Mono<Deleted> delete(String key) {
        return delete(key, null);
    }

    /**
     * Deletes one entry only if it is at {@code expectedVersion}.
     *
     * @param key the key
     * @param expectedVersion the version the caller read (at least 1), or {@code null} for any
     * @return the version deleted; fails with {@link PoolConflictException} when it is at another version
     */
    public Mono<Deleted> delete(String key, Long expectedVersion) {
        Utf16.checkText(Objects.requireNonNull(key, "key"), "key");
        String operation = "SharedPoolService/DeletePoolEntry";
        return blocking(() -> {
            DeletePoolEntryRequest.Builder request = DeletePoolEntryRequest.newBuilder().setPoolId(poolId).setKey(key)
                    .setWriter(writer);
            if (expectedVersion != null) {
                request.setExpectedVersion(expectedVersion);
            }
            DeletePoolEntryRequest built = request.build();
            try {
                DeletePoolEntryResponse r = connection.call(operation, false, () -> pools().deletePoolEntry(built));
                return new Deleted(r.getDeletedVersion(), r.getSequence());
            } catch (RemoteMemoryException e) {
                throw conflictOr(e, key, expectedVersion);
            }
        });
    }

    /**
     * Every entry whose key starts with {@code keyPrefix}, ordered by key, reading the next page
     * (of the builder's {@code pageSize}) as the subscriber asks for more.
     *
     * @param keyPrefix the keys' prefix; empty for every entry
     * @return the entries
     */
    public Flux<Entry> listEntries(String keyPrefix) {
        Utf16.checkText(Objects.requireNonNull(keyPrefix, "keyPrefix"), "key_prefix");
        return entryPage(keyPrefix, "")
                .expand(page -> page.nextPageToken().isEmpty() ? Mono.empty() : entryPage(keyPrefix, page.nextPageToken()))
                .concatMapIterable(PagedRead.Page::items);
    }

    private Mono<PagedRead.Page<Entry>> entryPage(String keyPrefix, String token) {
        return blocking(() -> {
            ListPoolEntriesRequest request = ListPoolEntriesRequest.newBuilder().setPoolId(poolId)
                    .setKeyPrefix(keyPrefix).setPageSize(pageSize).setPageToken(token).build();
            ListPoolEntriesResponse r = connection.call("SharedPoolService/ListPoolEntries", true,
                    () -> pools().listPoolEntries(request));
            return new PagedRead.Page<>(r.getEntriesList().stream().map(SharedMemoryPool::entry).toList(),
                    r.getNextPageToken());
        });
    }

    // ---------------------------------------------------------------- events

    /**
     * The events committed so far after {@code afterSequence}, oldest first, following the pages.
     *
     * @param afterSequence only events with a larger sequence number (0: from the first)
     * @return the events; the stream completes at the newest
     */
    public Flux<Event> listEvents(long afterSequence) {
        return eventPage(afterSequence, "")
                .expand(page -> page.nextPageToken().isEmpty() ? Mono.empty() : eventPage(afterSequence, page.nextPageToken()))
                .concatMapIterable(PagedRead.Page::items);
    }

    private Mono<PagedRead.Page<Event>> eventPage(long afterSequence, String token) {
        return blocking(() -> {
            ListPoolEventsRequest request = ListPoolEventsRequest.newBuilder().setPoolId(poolId)
                    .setAfterSequence(afterSequence).setPageSize(pageSize).setPageToken(token).build();
            ListPoolEventsResponse r = connection.call("SharedPoolService/ListPoolEvents", true,
                    () -> pools().listPoolEvents(request));
            return new PagedRead.Page<>(r.getEventsList().stream().map(SharedMemoryPool::event).toList(),
                    r.getNextPageToken());
        });
    }

    /**
     * The pool's events after {@code afterSequence} (0 replays all), then each new one as it is
     * committed, by any writer or server replica, until the subscriber cancels (which cancels the
     * call) or the pool is closed (it completes). When the connection is lost (the server
     * restarts, the network drops) the stream is reopened after the last event delivered, so no
     * event is repeated or missed; it fails with
     * {@link RemoteMemoryException.Unavailable} once the server stays unreachable for longer than
     * the connection's deadline, and at once with any other {@link RemoteMemoryException} (e.g.
     * {@code InvalidArgument} naming the field). To resume later, subscribe again with the last
     * sequence seen.
     *
     * @param afterSequence only events with a larger sequence number (0: from the first)
     * @return the events, in sequence order
     */
    public Flux<Event> watch(long afterSequence) {
        if (afterSequence < 0) {
            throw new IllegalArgumentException("afterSequence: must not be negative, not " + afterSequence);
        }
        return Flux.defer(() -> {
            // Per subscriber: the last sequence delivered, and when the current outage began.
            AtomicLong last = new AtomicLong(afterSequence);
            AtomicLong opened = new AtomicLong();
            AtomicLong outageStart = new AtomicLong(Long.MIN_VALUE);
            return Flux.defer(() -> {
                        opened.set(System.nanoTime());
                        return stream(last.get());
                    })
                    .doOnNext(event -> {
                        last.set(event.sequence());
                        outageStart.set(Long.MIN_VALUE);
                    })
                    .retryWhen(Retry.from(signals -> signals.concatMap(signal -> {
                        Throwable failure = signal.failure();
                        if (!(failure instanceof RemoteMemoryException.Unavailable)) {
                            return Mono.error(failure);
                        }
                        long now = System.nanoTime();
                        if (outageStart.get() == Long.MIN_VALUE || now - opened.get() > CONNECTED.toNanos()) {
                            outageStart.set(now);
                        }
                        if (now - outageStart.get() > connection.deadline().toNanos()) {
                            return Mono.error(failure);
                        }
                        long attempt = Math.min(signal.totalRetriesInARow(), 10);
                        long waitMs = Math.min(FIRST_RESUME_WAIT.toMillis() << attempt, LONGEST_RESUME_WAIT.toMillis());
                        connection.resetConnectBackoff();
                        return Mono.delay(Duration.ofMillis(waitMs));
                    })))
                    // Closed: the call is cancelled (not left holding the channel's shutdown) and
                    // the subscriber completes, rather than seeing the closed channel as an outage.
                    .takeUntilOther(closing.asMono());
        });
    }

    /** One WatchPoolEvents call, its failure as a {@link RemoteMemoryException}. */
    private Flux<Event> stream(long afterSequence) {
        String operation = "SharedPoolService/WatchPoolEvents";
        WatchPoolEventsRequest request = WatchPoolEventsRequest.newBuilder().setPoolId(poolId)
                .setAfterSequence(afterSequence).build();
        return Flux.create(sink -> connection.streamStub(SharedPoolServiceGrpc::newStub).watchPoolEvents(request,
                new ClientResponseObserver<WatchPoolEventsRequest, WatchPoolEventsResponse>() {
                    @Override
                    public void beforeStart(ClientCallStreamObserver<WatchPoolEventsRequest> call) {
                        sink.onDispose(() -> call.cancel("the subscriber cancelled", null));
                    }

                    @Override
                    public void onNext(WatchPoolEventsResponse response) {
                        sink.next(event(response.getEvent()));
                    }

                    @Override
                    public void onError(Throwable t) {
                        if (!sink.isCancelled()) {
                            sink.error(RemoteMemoryException.of(operation, Status.fromThrowable(t).asRuntimeException(
                                    Status.trailersFromThrowable(t))));
                        }
                    }

                    @Override
                    public void onCompleted() {
                        // The server ends a watch only when it shuts down: reopen it as after a drop.
                        sink.error(RemoteMemoryException.of(operation, Status.UNAVAILABLE
                                .withDescription("the server ended the watch").asRuntimeException()));
                    }
                }));
    }

    // ---------------------------------------------------------------- rendering

    /**
     * This pool's entries for a model call, newest first, each line {@code [SHARED:key] content},
     * within {@code maxTokens} (AgentScope-Java's estimate; 0 means the server's 2000).
     *
     * @param maxTokens the budget
     * @return the rendering as one text
     */
    public Mono<Rendering> renderContext(int maxTokens) {
        return renderContext(List.of(poolId), maxTokens, false);
    }

    /**
     * Several pools' entries merged, newest first, within {@code maxTokens}.
     *
     * @param poolIds 1 to 16 pools of the caller's tenant
     * @param maxTokens the budget (0: the server's 2000; at most 200,000)
     * @param asMessages one SYSTEM message per entry instead of one text
     * @return the rendering
     */
    public Mono<Rendering> renderContext(List<String> poolIds, int maxTokens, boolean asMessages) {
        List<String> ids = List.copyOf(poolIds);
        for (int i = 0; i < ids.size(); i++) {
            Utf16.checkText(ids.get(i), "pool_ids[" + i + "]");
        }
        return blocking(() -> {
            RenderPoolContextRequest request = RenderPoolContextRequest.newBuilder().addAllPoolIds(ids)
                    .setMaxTokens(maxTokens)
                    .setFormat(asMessages ? PoolRenderFormat.POOL_RENDER_FORMAT_MESSAGES : PoolRenderFormat.POOL_RENDER_FORMAT_TEXT)
                    .build();
            RenderPoolContextResponse r = connection.call("SharedPoolService/RenderPoolContext", true,
                    () -> pools().renderPoolContext(request));
            return new Rendering(r.getText(), List.copyOf(r.getMessagesList()), r.getEntryCount(), r.getOmittedCount(),
                    r.getTokenCount());
        });
    }

    /** Ends this pool's watches (their subscribers complete), then closes the connection if this object created it. */
    @Override
    public void close() {
        closing.tryEmitValue(true);
        if (ownsConnection) {
            connection.close();
        }
    }

    // ---------------------------------------------------------------- conversion

    /** A refused compare-and-set as a {@link PoolConflictException}; any other failure as it is. */
    private RemoteMemoryException conflictOr(RemoteMemoryException e, String key, Long expectedVersion) {
        if (e.getCode() != Status.Code.ABORTED || expectedVersion == null
                || !(e.getCause() instanceof StatusRuntimeException call)) {
            return e;
        }
        Metadata trailers = call.getTrailers();
        String actual = trailers == null ? null : trailers.get(CURRENT_VERSION_KEY);
        if (actual == null) {
            return e;
        }
        return new PoolConflictException(e.getOperation(), poolId, key, expectedVersion, Long.parseLong(actual),
                e.getServerMessage(), e.getCause());
    }

    private static Instant instant(Timestamp t) {
        return Instant.ofEpochSecond(t.getSeconds(), t.getNanos());
    }

    private static Entry entry(dev.agentscopememory.grpc.v1.PoolEntry e) {
        return new Entry(e.getPoolId(), e.getKey(), e.getContentJson(), e.getVersion(), e.getCreatedBy(),
                e.getUpdatedBy(), instant(e.getCreateTime()), instant(e.getUpdateTime()), e.getMetadataJson());
    }

    private static Event event(dev.agentscopememory.grpc.v1.PoolEvent e) {
        return new Event(e.getSequence(), e.getEventType(), e.getPoolId(), e.getKey(), e.getVersion(), e.getWriter(),
                instant(e.getTime()));
    }

    /** Builder of {@link SharedMemoryPool}: the connection options and the pool. */
    public static final class Builder extends ConnectionOptions<Builder> {
        private String poolId;
        private String writer = "";
        private int pageSize;

        private Builder() {}

        /** The pool (required): any Unicode text of 1-512 bytes of UTF-8 without control characters. */
        public Builder poolId(String poolId) {
            this.poolId = Objects.requireNonNull(poolId, "poolId");
            return this;
        }

        /** Who writes, recorded on entries and events (e.g. the agent's name); default empty. */
        public Builder writer(String writer) {
            this.writer = writer == null ? "" : writer;
            return this;
        }

        /** Entries or events per page of a listing (1-1000); 0 (default) means the server's 100. */
        public Builder pageSize(int pageSize) {
            if (pageSize < 0 || pageSize > 1000) {
                throw new IllegalArgumentException("pageSize: must be between 0 and 1000, not " + pageSize);
            }
            this.pageSize = pageSize;
            return this;
        }

        /** The pool client; it opens its own connection unless {@code connection(...)} was given. */
        public SharedMemoryPool build() {
            return new SharedMemoryPool(this);
        }
    }
}
