package dev.agentscopememory.agentscope1;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.grpc.v1.AddFailure;
import dev.agentscopememory.grpc.v1.AddMessagesRequest;
import dev.agentscopememory.grpc.v1.AddMessagesResponse;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.LeaseGranted;
import dev.agentscopememory.grpc.v1.MessagesAdded;
import dev.agentscopememory.grpc.v1.MessagesChanged;
import dev.agentscopememory.grpc.v1.WatchMessagesRequest;
import dev.agentscopememory.grpc.v1.WatchMessagesResponse;
import dev.agentscopememory.grpc.v1.WatchStarted;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Coherent caching of one memory's messages ({@code MemoryService.WatchMessages}): a stream on
 * which this client renews a short lease and the server announces every change of the memory,
 * acknowledging a write to its writer only once this client has taken the announcement in (or
 * its lease has run out). While the lease is fresh and the cached copy carries the etag last
 * announced, the copy is current and {@code getMessages} needs no call.
 *
 * <p>The lease is counted from the moment this client <em>sent</em> the renewal, the server's
 * from when it received it, so this client stops trusting its copy no later than the server
 * stops waiting for it. Anything unexpected (the stream fails, a renewal is not granted in time,
 * the server offers no coherent caching) only makes {@link #current} false, and reads go back to
 * conditional calls ({@code if_none_match}).
 *
 * <p>The stream also carries this client's adds ({@link #add}): a message on a stream that is
 * already open costs far less than an {@code AddMessages} call of its own. The server applies them
 * in order and answers each once it is committed, with what {@code AddMessages} would have
 * answered; when the stream ends before the answer, the caller sends the same request (same
 * request id) as {@code AddMessages}, and the server's replay detection stores nothing twice.
 */
final class MessageWatch implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(MessageWatch.class);

    /** Renewals for every watch of the process; daemon, so it never keeps a JVM alive. */
    private static final ScheduledExecutorService RENEWALS = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "agentscope-memory-lease-renewal");
        t.setDaemon(true);
        return t;
    });

    /** How long after a failed stream a read may open a new one. */
    private static final long REOPEN_AFTER_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final RemoteConnection connection;
    private final String memoryId;
    /** Applies an announcement to the memory's cached copy, before it is acknowledged. */
    private final Consumer<MessagesChanged> onChanged;
    /** Unused this long (no read, no add), the watch is released. */
    private final long idleNanos;
    private volatile long lastUsedNanos = System.nanoTime();

    private final Object lock = new Object();
    private StreamObserver<WatchMessagesRequest> requests;
    private String watchId = "";
    /** The etag the server last announced; null while no stream is open. */
    private String announcedEtag;
    private long leaseNanos;
    private long leaseUntilNanos;
    private boolean leased;
    private long nextRenewal = 1;
    private final Map<Long, Long> renewalsSent = new HashMap<>();
    private ScheduledFuture<?> renewer;
    /** The server offers no coherent caching (a replicated store): never ask again. */
    private boolean unavailable;
    private long reopenAfterNanos;
    private boolean closed;
    /** Which stream is the open one: callbacks of an earlier stream change nothing. */
    private long generation;
    /** The open stream's server takes adds ({@code WatchStarted.accepts_adds}). */
    private boolean acceptsAdds;
    private long nextAddId = 1;
    /** Adds sent on the open stream and not answered yet, by add id. */
    private final Map<Long, CompletableFuture<MessagesAdded>> pendingAdds = new HashMap<>();
    /** For pipelined adds ({@link #addPipelined}): what applies each one's answer to the copy, by add id. */
    private final Map<Long, Consumer<MessagesAdded>> appliers = new HashMap<>();

    MessageWatch(RemoteConnection connection, String memoryId, Consumer<MessagesChanged> onChanged, long idleNanos) {
        this.connection = connection;
        this.memoryId = memoryId;
        this.onChanged = onChanged;
        this.idleNanos = idleNanos;
    }

    /** Opens the stream unless it is open, closed, unavailable or failed just now. Never blocks. */
    void ensureOpen() {
        lastUsedNanos = System.nanoTime();
        synchronized (lock) {
            open(null);
        }
    }

    /** What the server said when the watch started; {@code messageCount} -1 when it did not say. */
    record Started(String etag, long messageCount) {}

    /**
     * Opens the stream with a subscription that creates the memory first ({@code
     * WatchMessagesRequest.create}) and waits, at most {@code timeoutNanos}, until the watch has
     * started. Returns null when no stream was opened (one is open already, or the watch is closed,
     * unavailable or failed just now) or it ended before starting (a server without coherent
     * caching, or the create failed): then the caller creates the memory with {@code
     * CreateMemory}, which reports any error.
     */
    Started openCreating(CreateMemoryRequest create, long timeoutNanos) {
        lastUsedNanos = System.nanoTime();
        CompletableFuture<Started> started;
        synchronized (lock) {
            started = open(create);
        }
        if (started == null) {
            return null;
        }
        try {
            return started.get(timeoutNanos, TimeUnit.NANOSECONDS);
        } catch (ExecutionException | TimeoutException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RemoteMemoryException(OPEN, Status.Code.CANCELLED, "interrupted", e);
        }
    }

    /** With the lock held: opens a stream (see {@link #ensureOpen}); its start, or null when none was opened. */
    private CompletableFuture<Started> open(CreateMemoryRequest create) {
        if (requests != null || closed || unavailable || System.nanoTime() < reopenAfterNanos) {
            return null;
        }
        long renewal = nextRenewal++;
        CompletableFuture<Started> started = new CompletableFuture<>();
        StreamObserver<WatchMessagesRequest> opened =
                connection.memoryServiceAsync().watchMessages(new Responses(++generation, renewal, started));
        requests = opened;
        renewalsSent.put(renewal, System.nanoTime());
        WatchMessagesRequest.Builder subscription =
                WatchMessagesRequest.newBuilder().setMemoryId(memoryId).setRenewal(renewal);
        if (create != null) {
            subscription.setCreate(create);
        }
        opened.onNext(subscription.build());
        return started;
    }

    /** True when a copy named {@code etag} is the memory's current messages. */
    boolean current(String etag) {
        synchronized (lock) {
            return leased && etag != null && etag.equals(announcedEtag) && System.nanoTime() - leaseUntilNanos < 0;
        }
    }

    /** The id of the open watch, for this client's own adds; empty when none. */
    String watchId() {
        synchronized (lock) {
            return requests == null ? "" : watchId;
        }
    }

    /**
     * This client's own add (sent with {@link #watchId}) moved the memory from {@code previous} to
     * {@code etag}; the server announced it to every other watcher but not to this one.
     */
    void ownWrite(String previous, String etag) {
        synchronized (lock) {
            if (requests != null && previous.equals(announcedEtag) && !etag.isEmpty()) {
                announcedEtag = etag;
            }
        }
    }

    /**
     * Sends {@code request} over the open watch and waits for its answer, at most {@code
     * timeoutNanos}. Returns null, having sent nothing, when no watch that takes adds is open, and
     * also when the stream ended before the answer came: then the add may or may not have been
     * stored, and the caller sends the same request as {@code AddMessages} (the request id makes
     * that safe). A failed add throws what {@code AddMessages} would have ({@link
     * RemoteMemoryException#of}); no answer in time throws {@link
     * RemoteMemoryException.DeadlineExceeded}. When the answer came, the watch already knows of
     * this write (it is not announced to it): the caller need not call {@link #ownWrite}.
     */
    AddMessagesResponse add(AddMessagesRequest request, long timeoutNanos) {
        lastUsedNanos = System.nanoTime();
        CompletableFuture<MessagesAdded> answer = new CompletableFuture<>();
        synchronized (lock) {
            if (requests == null || !acceptsAdds || watchId.isEmpty()) {
                return null;
            }
            long addId = nextAddId++;
            pendingAdds.put(addId, answer);
            send(WatchMessagesRequest.newBuilder().setAdd(request).setAddId(addId).build());
        }
        MessagesAdded added;
        try {
            added = answer.get(timeoutNanos, TimeUnit.NANOSECONDS);
        } catch (ExecutionException streamEnded) {
            return null;
        } catch (TimeoutException e) {
            throw RemoteMemoryException.of(ADD, Status.DEADLINE_EXCEEDED
                    .withDescription("no answer to an add on the watch within the deadline").asRuntimeException());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RemoteMemoryException(ADD, Status.Code.CANCELLED, "interrupted", e);
        }
        if (added.hasFailure()) {
            throw failure(added.getFailure());
        }
        return added.getResponse();
    }

    /** What {@code AddMessages} would have thrown for an add the server answered with {@code failure}. */
    static RemoteMemoryException failure(AddFailure failure) {
        return RemoteMemoryException.of(ADD, Status.fromCodeValue(failure.getCode())
                .withDescription(failure.getMessage()).asRuntimeException());
    }

    /** A pipelined add on its way: its answer, and the stream (generation) it went on. */
    record Sent(CompletableFuture<MessagesAdded> answer, long generation) {}

    /**
     * Sends {@code request} over the open watch without waiting for its answer ({@code
     * addConfirmation}). {@code apply} takes in the answer (success or failure) on the stream's
     * thread, before the watch takes in the add's etag, so a read that finds the copy current
     * finds it with the add. Returns null, having sent nothing, when no watch that takes adds is
     * open, or when {@code onlyOnGeneration} is not negative and is not the open stream (adds
     * still pending on an ended stream must be sent again before any later add). When the stream
     * ends before the answer, the returned answer completes exceptionally and {@code apply} is
     * never called: the caller sends the request again as {@code AddMessages}.
     */
    Sent addPipelined(AddMessagesRequest request, long onlyOnGeneration, Consumer<MessagesAdded> apply) {
        lastUsedNanos = System.nanoTime();
        CompletableFuture<MessagesAdded> answer = new CompletableFuture<>();
        synchronized (lock) {
            if (requests == null || !acceptsAdds || watchId.isEmpty()
                    || (onlyOnGeneration >= 0 && onlyOnGeneration != generation)) {
                return null;
            }
            long addId = nextAddId++;
            pendingAdds.put(addId, answer);
            appliers.put(addId, apply);
            send(WatchMessagesRequest.newBuilder().setAdd(request).setAddId(addId).build());
            return new Sent(answer, generation);
        }
    }

    private static final String ADD = "MemoryService/AddMessages";
    private static final String OPEN = "MemoryService/WatchMessages";

    private void send(WatchMessagesRequest request) {
        // Called with the lock held: a stream observer takes one message at a time.
        if (requests != null) {
            requests.onNext(request);
        }
    }

    private void renew() {
        synchronized (lock) {
            if (requests == null) {
                return;
            }
            if (System.nanoTime() - lastUsedNanos > idleNanos && pendingAdds.isEmpty()) {
                // Nobody used the copy for a while: stop holding a stream (and renewing) for it.
                // Released outside the lock, on this scheduler's thread.
                RENEWALS.execute(this::releaseIfIdle);
                return;
            }
            long renewal = nextRenewal++;
            renewalsSent.put(renewal, System.nanoTime());
            send(WatchMessagesRequest.newBuilder().setRenewal(renewal).build());
        }
    }

    private void granted(long renewal, long durationNanos) {
        Long sent = renewalsSent.remove(renewal);
        renewalsSent.keySet().removeIf(n -> n < renewal);
        if (sent == null) {
            return;
        }
        leaseNanos = durationNanos;
        long until = sent + durationNanos;
        if (!leased || until - leaseUntilNanos > 0) {
            leaseUntilNanos = until;
        }
        leased = true;
    }

    /** Stops trusting the copy; with {@code unavailable}, never asks this server again. */
    private void ended(long ofGeneration, boolean unavailableHere) {
        synchronized (lock) {
            if (ofGeneration != generation) {
                return;
            }
            generation++;
            requests = null;
            watchId = "";
            acceptsAdds = false;
            announcedEtag = null;
            // Their callers send them again as AddMessages, with the same request ids.
            pendingAdds.values().forEach(a -> a.completeExceptionally(new IllegalStateException("watch ended")));
            pendingAdds.clear();
            appliers.clear();
            leased = false;
            renewalsSent.clear();
            if (renewer != null) {
                renewer.cancel(false);
                renewer = null;
            }
            unavailable |= unavailableHere;
            reopenAfterNanos = System.nanoTime() + REOPEN_AFTER_NANOS;
        }
    }

    /** Ends the current watch (released: this client no longer trusts its copy); the next read opens a new one. */
    void restart() {
        release(false);
    }

    private void releaseIfIdle() {
        synchronized (lock) {
            if (requests == null || System.nanoTime() - lastUsedNanos <= idleNanos || !pendingAdds.isEmpty()) {
                return;
            }
        }
        log.debug("memory {}: watch unused for {} ms, released", memoryId, TimeUnit.NANOSECONDS.toMillis(idleNanos));
        release(false);
    }

    /** Whether an open stream takes adds ({@link #addPipelined} would send one). */
    boolean takesAdds() {
        synchronized (lock) {
            return requests != null && acceptsAdds && !watchId.isEmpty();
        }
    }

    /** Whether a stream is open (for tests). */
    boolean isOpen() {
        synchronized (lock) {
            return requests != null;
        }
    }

    @Override
    public void close() {
        release(true);
    }

    private void release(boolean closing) {
        StreamObserver<WatchMessagesRequest> open;
        long current;
        synchronized (lock) {
            closed |= closing;
            open = requests;
            current = generation;
        }
        ended(current, false);
        if (!closing) {
            synchronized (lock) {
                reopenAfterNanos = System.nanoTime();
            }
        }
        if (open != null) {
            // Tells the server this client no longer trusts its copy, so writes stop waiting for
            // it at once (a stream that just ends makes them wait until the lease runs out).
            synchronized (lock) {
                try {
                    open.onNext(WatchMessagesRequest.newBuilder().setRelease(true).build());
                    open.onCompleted();
                } catch (RuntimeException alreadyFailed) {
                    // the stream had ended already
                }
            }
        }
    }

    private static long nanos(com.google.protobuf.Duration d) {
        return TimeUnit.SECONDS.toNanos(d.getSeconds()) + d.getNanos();
    }

    private final class Responses implements StreamObserver<WatchMessagesResponse> {
        private final long ofGeneration;
        /** The renewal number of the stream's first message (the subscription). */
        private final long firstRenewal;
        /** Completed when the watch starts; with null when the stream ends first. */
        private final CompletableFuture<Started> started;

        Responses(long ofGeneration, long firstRenewal, CompletableFuture<Started> started) {
            this.ofGeneration = ofGeneration;
            this.firstRenewal = firstRenewal;
            this.started = started;
        }

        @Override
        public void onNext(WatchMessagesResponse response) {
            synchronized (lock) {
                if (ofGeneration != generation) {
                    return;
                }
            }
            switch (response.getEventCase()) {
                case STARTED -> {
                    WatchStarted start = response.getStarted();
                    synchronized (lock) {
                        watchId = start.getWatchId();
                        acceptsAdds = start.getAcceptsAdds();
                        announcedEtag = start.getEtag();
                        granted(firstRenewal, nanos(start.getLeaseDuration()));
                        long period = Math.max(leaseNanos / 3, TimeUnit.MILLISECONDS.toNanos(10));
                        renewer = RENEWALS.scheduleAtFixedRate(MessageWatch.this::renew, period, period, TimeUnit.NANOSECONDS);
                    }
                    // -1: a server older than message_count did not say (the client must read).
                    started.complete(new Started(start.getEtag(), start.hasMessageCount() ? start.getMessageCount() : -1));
                }
                case LEASE_GRANTED -> {
                    LeaseGranted grant = response.getLeaseGranted();
                    synchronized (lock) {
                        granted(grant.getRenewal(), nanos(grant.getLeaseDuration()));
                    }
                }
                case CHANGED -> {
                    MessagesChanged changed = response.getChanged();
                    // The copy first, then the etag, then the acknowledgement: once the server
                    // acknowledges the write, no read here can return the state before it.
                    onChanged.accept(changed);
                    synchronized (lock) {
                        if (ofGeneration != generation) {
                            return;
                        }
                        announcedEtag = changed.getEtag();
                        send(WatchMessagesRequest.newBuilder().setAckSequence(changed.getSequence()).build());
                    }
                }
                case ADDED -> {
                    MessagesAdded added = response.getAdded();
                    CompletableFuture<MessagesAdded> waiting;
                    Consumer<MessagesAdded> apply;
                    synchronized (lock) {
                        if (ofGeneration != generation) {
                            return;
                        }
                        waiting = pendingAdds.remove(added.getAddId());
                        apply = appliers.remove(added.getAddId());
                    }
                    if (apply != null) {
                        // A pipelined add: the copy first, then the etag (as for an announcement).
                        apply.accept(added);
                    }
                    synchronized (lock) {
                        if (ofGeneration == generation && added.hasResponse()) {
                            // In stream order, before any later announcement is taken in.
                            AddMessagesResponse r = added.getResponse();
                            ownWrite(r.getPreviousEtag(), r.getEtag());
                        }
                    }
                    if (waiting != null) {
                        waiting.complete(added);
                    }
                }
                default -> { }
            }
        }

        @Override
        public void onError(Throwable t) {
            Status status = Status.fromThrowable(t);
            boolean unavailableHere = status.getCode() == Status.Code.FAILED_PRECONDITION
                    || status.getCode() == Status.Code.UNIMPLEMENTED;
            if (unavailableHere) {
                log.info("memory {}: the server offers no coherent caching ({}); reads stay conditional",
                        memoryId, status.getDescription());
            } else if (status.getCode() != Status.Code.CANCELLED) {
                log.debug("memory {}: watch ended ({}); reads are conditional until it is open again", memoryId, status);
            }
            ended(ofGeneration, unavailableHere);
            started.complete(null);
        }

        @Override
        public void onCompleted() {
            ended(ofGeneration, false);
            started.complete(null);
        }
    }
}
