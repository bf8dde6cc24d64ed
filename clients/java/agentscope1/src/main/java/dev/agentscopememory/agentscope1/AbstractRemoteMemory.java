package dev.agentscopememory.agentscope1;

import dev.agentscopememory.agentscope1.internal.MsgConverter;
import dev.agentscopememory.agentscope1.internal.CopiedOnRead;
import dev.agentscopememory.client.Ids;
import dev.agentscopememory.client.MemoryKind;
import dev.agentscopememory.client.ConnectionOptions;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.PagedRead;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.RemoteState;
import dev.agentscopememory.client.Visibility;
import dev.agentscopememory.client.internal.Utf16;
import dev.agentscopememory.client.internal.WireEnums;
import dev.agentscopememory.grpc.v1.AddMessagesRequest;
import dev.agentscopememory.grpc.v1.AddMessagesResponse;
import dev.agentscopememory.grpc.v1.AutoContextConfig;
import dev.agentscopememory.grpc.v1.ClearMessagesRequest;
import dev.agentscopememory.grpc.v1.ClearMessagesResponse;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.DeleteMessageRequest;
import dev.agentscopememory.grpc.v1.DeleteMessageResponse;
import dev.agentscopememory.grpc.v1.GetMemoryRequest;
import dev.agentscopememory.grpc.v1.GetMessagesRequest;
import dev.agentscopememory.grpc.v1.GetMessagesResponse;
import dev.agentscopememory.grpc.v1.InheritedMessage;
import dev.agentscopememory.grpc.v1.ListInheritedMessagesRequest;
import dev.agentscopememory.grpc.v1.ListInheritedMessagesResponse;
import dev.agentscopememory.grpc.v1.MessagesAdded;
import dev.agentscopememory.grpc.v1.MessagesChanged;
import dev.agentscopememory.grpc.v1.SetParentRequest;
import dev.agentscopememory.grpc.v1.StateEntry;
import io.agentscope.core.memory.Memory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the remote memories share: a memory on an agentscope-memory server addressed by its id,
 * created on first use, with AgentScope's {@link Memory} operations over gRPC ({@code
 * InMemoryMemory}'s contract: fresh mutable lists in insertion order, out-of-range deletes are
 * no-ops, adds carry a request id so retries store nothing twice).
 *
 * <p>Only {@link RemoteMemory}, {@link RemoteAutoContextMemory} and {@link RemoteTieredMemory} extend it (its constructor is
 * package-private); subclass one of those instead.
 */
public abstract class AbstractRemoteMemory implements Memory, AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(AbstractRemoteMemory.class);

    /** Messages per AddMessages call when adding many (below the server's default limit). */
    static final int ADD_BATCH_MESSAGES = 500;

    /** Serialised bytes per AddMessages call when adding many (well below the 32 MiB default). */
    static final long ADD_BATCH_BYTES = 8L * 1024 * 1024;

    protected final RemoteConnection connection;
    protected final String memoryId;
    private final boolean ownsConnection;
    private final boolean createIfMissing;
    private final Map<String, String> labels;
    private final int pageSize;
    private final MemoryKind kind;
    private final AutoContextConfig autoContextConfig;
    /** Parent/child scopes: the parent set on first use (null: none), and how adds are marked. */
    private final String parentMemoryId;
    private final Visibility visibility;
    private final boolean includeInherited;
    /**
     * With {@code includeInherited}: how many inherited messages led the list {@link
     * #getMessages()} last returned (or {@link #messageCount()} last counted), -1 before the
     * first. AgentScope's {@code deleteMessage(i)} means index i of that list; the parents may
     * share or delete messages at any time, so counting them again at the delete would move the
     * index onto another of this memory's own messages.
     */
    private volatile int inheritedSeen = -1;
    /**
     * The ids of this memory's own messages as this client's caller knows them (for a kind that
     * {@link #indexesLastRead() indexes the last read}): the list {@link #getMessages()} last
     * returned, with this client's adds, deletes and clears since; null before the first read.
     * AgentScope's {@code deleteMessage(i)} names index i of that list, and another client that
     * deletes a message in between must not move the delete onto another one.
     */
    private LastRead lastRead;
    private final Object lastReadLock = new Object();

    /**
     * The list a caller last read, as ids: taken from the returned list without copying anything
     * (an agent reads its history many times a turn and adds between reads), turned into a list
     * of ids only when this client deletes or clears.
     */
    private static final class LastRead {
        /** The cached messages the returned list copies from: never handed out, never changed. */
        private final List<Msg> read;
        /** The ids of this client's adds since. */
        private final ArrayList<String> added = new ArrayList<>();
        /** The whole list, once a delete or a clear changed it; null before. */
        private ArrayList<String> ids;

        LastRead(List<Msg> read) {
            this.read = read;
        }

        void add(String id) {
            (ids != null ? ids : added).add(id);
        }

        ArrayList<String> ids() {
            if (ids == null) {
                ids = new ArrayList<>(read.size() + added.size());
                for (Msg m : read) {
                    ids.add(m.getId());
                }
                ids.addAll(added);
            }
            return ids;
        }
    }
    private volatile boolean ensured;
    /** Serialises first-use creation; private so no caller can hold it and stall our calls. */
    private final Object createLock = new Object();

    /**
     * The messages as last read or written by this client, with the etag naming that state on the
     * server. getMessages sends the etag; while nothing changed, the server answers "not modified"
     * without the messages, and when messages were only added since (by this client or another),
     * it sends just those (a delta) to append here. AgentScope calls getMessages about 2 + 4N times
     * a turn, so this keeps long conversations from crossing the wire, and being decoded, again and
     * again. Never handed out: callers get copies ({@code handedOut}), each made when a caller
     * first reads that message and handed out again by later reads, as InMemoryMemory hands out
     * the same message objects each time.
     */
    private record Snapshot(String etag, List<Msg> messages, AtomicReferenceArray<Msg> handedOut) {
        Snapshot(String etag, List<Msg> messages) {
            this(etag, messages, new AtomicReferenceArray<>(messages.size()));
        }

        /** This state with {@code added} after its messages, named {@code etag}; the copies handed out so far stay. */
        Snapshot then(String etag, List<Msg> added) {
            List<Msg> all = concat(messages, added);
            AtomicReferenceArray<Msg> copies = new AtomicReferenceArray<>(all.size());
            for (int i = 0; i < messages.size(); i++) {
                copies.setPlain(i, handedOut.getPlain(i));
            }
            return new Snapshot(etag, all, copies);
        }

        /**
         * This state without its message at {@code index}, named {@code etag}; the copies handed
         * out so far stay with their messages.
         */
        Snapshot without(String etag, int index) {
            List<Msg> rest = new ArrayList<>(messages.size() - 1);
            AtomicReferenceArray<Msg> copies = new AtomicReferenceArray<>(messages.size() - 1);
            for (int i = 0; i < messages.size(); i++) {
                if (i != index) {
                    copies.setPlain(rest.size(), handedOut.getPlain(i));
                    rest.add(messages.get(i));
                }
            }
            return new Snapshot(etag, List.copyOf(rest), copies);
        }

        /** A new list of the messages, followed by {@code ahead}'s, for a caller. */
        List<Msg> read(List<Msg> ahead) {
            return new CopiedOnRead(ahead.isEmpty() ? messages : concat(messages, ahead), handedOut);
        }
    }

    private final AtomicReference<Snapshot> snapshot = new AtomicReference<>();

    /** Coherent caching (the builder's {@code coherentCache}); null when off. */
    private final MessageWatch watch;

    /** Adds over the watch do not all wait for their answers (the builder's {@code addConfirmation}). */
    private final boolean pipelined;

    /** Which adds wait for their confirmation; {@link AddConfirmation#EVERY_ADD} without coherent caching. */
    private final AddConfirmation confirmation;

    /**
     * A pipelined add whose answer has not been taken in: its request (sent again, same request
     * id, as {@code AddMessages} when its stream ends first) and its messages, which reads show
     * after the copy's until the answer moves them into the copy.
     */
    private static final class PendingAdd {
        final AddMessagesRequest request;
        final List<Msg> messages;
        /**
         * The adds it was made of, each as it would have gone alone: just {@link #request}, unless
         * adds held back were sent together ({@link #HOLD_NANOS}). A failure of the whole is not
         * theirs to share: they are then sent again one by one ({@link #split}).
         */
        final List<AddMessagesRequest> parts;
        /** When its first part was added (how long it has waited is counted from there). */
        final long sentNanos;
        /** Null until sent: held back for a moment ({@link #HOLD_NANOS}), or queued before it goes out. */
        volatile MessageWatch.Sent sent;
        /** Answered with a failure while made of several adds: to be sent again one add at a time. */
        volatile boolean split;

        PendingAdd(AddMessagesRequest request, List<Msg> messages) {
            this(request, messages, List.of(request), System.nanoTime());
        }

        private PendingAdd(AddMessagesRequest request, List<Msg> messages, List<AddMessagesRequest> parts, long sentNanos) {
            this.request = request;
            this.messages = messages;
            this.parts = parts;
            this.sentNanos = sentNanos;
        }

        /** Whether {@code next} fits in one request with this (held) add: the batch limits of {@link #addMessages}. */
        boolean fits(AddMessagesRequest next) {
            return request.getMessagesCount() + next.getMessagesCount() <= ADD_BATCH_MESSAGES
                    && (long) request.getSerializedSize() + next.getSerializedSize() <= ADD_BATCH_BYTES;
        }

        /** This held add and {@code next} after it, as one add with a request id of its own. */
        PendingAdd then(AddMessagesRequest next, List<Msg> nextMessages) {
            AddMessagesRequest both = request.toBuilder()
                    .addAllMessages(next.getMessagesList())
                    .setRequestId(UUID.randomUUID().toString())
                    .build();
            List<AddMessagesRequest> all = new ArrayList<>(parts);
            all.add(next);
            List<Msg> msgs = new ArrayList<>(messages);
            msgs.addAll(nextMessages);
            return new PendingAdd(both, List.copyOf(msgs), List.copyOf(all), sentNanos);
        }

        /** Its stream ended before the answer: it must be sent again as {@code AddMessages}. */
        boolean orphaned() {
            MessageWatch.Sent s = sent;
            return s != null && s.answer().isCompletedExceptionally();
        }
    }

    /**
     * How long an add that does not wait may be held back before it is sent. A user's input or a
     * tool result is mostly followed at once by the model's output (a fast model, a tool that
     * answers at once) or by more adds; sent together they are one transaction on the server
     * instead of two, and the model output's wait is shorter. Reads show a held add at once, as
     * any add on its way; {@link #flush()}, every call that reaches the server, and the next add
     * that waits send it right away. Other clients see it at most this much later than they would
     * have.
     */
    static final long HOLD_NANOS = TimeUnit.MILLISECONDS.toNanos(2);

    /** Serialises pipelined adds and {@link #flush()}, so adds go out (and out again) in order. */
    private final Object pipelineLock = new Object();
    /** {@link #HOLD_NANOS}; tests set it longer, so that what they send within it goes together for certain. */
    volatile long holdNanos = HOLD_NANOS;
    /** Sends the held add ({@link #HOLD_NANOS}) when nothing else did first; set under {@link #pipelineLock}. */
    private ScheduledFuture<?> holdTimer;
    /**
     * Guards {@link #pending} and {@link #pendingFailure} and, with them, the moves of the copy
     * they take part in, so a read composes the copy and the pending adds of one moment. Never
     * held while waiting or calling the watch.
     */
    private final Object copyLock = new Object();
    /** Pipelined adds not yet answered (or to be sent again), in the order they were sent. */
    private final ArrayDeque<PendingAdd> pending = new ArrayDeque<>();
    /** Listed for the JVM's exit flush ({@link ExitFlush}); set under {@link #pipelineLock}. */
    private boolean exitFlushed;
    /** The first failure of a pipelined add not thrown yet. */
    private RuntimeException pendingFailure;

    AbstractRemoteMemory(AbstractBuilder<?> b, MemoryKind kind, AutoContextConfig config) {
        // The server's id rules and message, before any connection is opened.
        this.memoryId = Ids.checkId(b.memoryId, "memory_id");
        this.connection = b.connectionOrOpen();
        this.ownsConnection = !b.sharesConnection();
        this.createIfMissing = b.createIfMissing;
        this.labels = Map.copyOf(b.labels);
        this.pageSize = b.pageSize;
        this.kind = kind;
        this.autoContextConfig = config;
        this.parentMemoryId = b.parentMemoryId == null ? null : Ids.checkId(b.parentMemoryId, "parent_memory_id");
        this.visibility = b.visibility;
        this.includeInherited = b.includeInherited != null ? b.includeInherited : b.parentMemoryId != null;
        this.watch = b.coherentCache
                ? new MessageWatch(connection, memoryId, this::applyAnnounced, b.watchIdleTimeout.toNanos())
                : null;
        this.confirmation = b.coherentCache ? b.addConfirmation : AddConfirmation.EVERY_ADD;
        this.pipelined = confirmation != AddConfirmation.EVERY_ADD;
    }

    /** Extends the cached copy with messages another client added, when it is the state they follow. */
    private void applyAnnounced(MessagesChanged changed) {
        if (!changed.getAppended()) {
            return;
        }
        List<Msg> added = null;
        while (true) {
            Snapshot cached = snapshot.get();
            if (cached == null || !cached.etag().equals(changed.getPreviousEtag())) {
                return;
            }
            if (added == null) {
                added = MsgConverter.fromProto(changed.getMessagesList());
            }
            if (snapshot.compareAndSet(cached, cached.then(changed.getEtag(), added))) {
                return;
            }
        }
    }

    /** The id of the memory on the server. */
    public String getMemoryId() {
        return memoryId;
    }

    /** The connection this memory talks through. */
    public RemoteConnection getConnection() {
        return connection;
    }

    // ---------------------------------------------------------------- Memory

    /** Appends a message. A {@code null} message is ignored (the wire has no null message). */
    @Override
    public void addMessage(Msg message) {
        if (message == null) {
            return;
        }
        addMessages(List.of(message));
    }

    /**
     * Appends messages in order, in as few calls as the server's batch limits allow; each batch is
     * all-or-nothing and safe to retry.
     */
    public void addMessages(List<Msg> messages) {
        List<dev.agentscopememory.grpc.v1.Msg> batch = new ArrayList<>();
        long batchBytes = 0;
        boolean modelOutput = false;
        for (Msg m : messages) {
            if (m == null) {
                continue;
            }
            modelOutput |= m.getRole() == MsgRole.ASSISTANT;
            dev.agentscopememory.grpc.v1.Msg p = MsgConverter.toProto(m);
            int size = p.getSerializedSize();
            if (!batch.isEmpty()
                    && (batch.size() >= ADD_BATCH_MESSAGES || batchBytes + size > ADD_BATCH_BYTES)) {
                sendBatch(batch);
                batch = new ArrayList<>();
                batchBytes = 0;
            }
            batch.add(p);
            batchBytes += size;
        }
        if (!batch.isEmpty()) {
            sendBatch(batch);
        }
        if (indexesLastRead()) {
            synchronized (lastReadLock) {
                if (lastRead != null) {
                    for (Msg m : messages) {
                        if (m != null) {
                            lastRead.add(m.getId());
                        }
                    }
                }
            }
        }
        if (modelOutput && confirmation == AddConfirmation.MODEL_OUTPUT) {
            // The model's output is what a tool call or a reply to the user follows: it, and all
            // before it, must be stored before either happens.
            flush();
        }
    }

    private void sendBatch(List<dev.agentscopememory.grpc.v1.Msg> batch) {
        ensureMemory();
        AddMessagesRequest.Builder request = AddMessagesRequest.newBuilder()
                .setMemoryId(memoryId)
                .addAllMessages(batch)
                .setRequestId(UUID.randomUUID().toString())
                .setVisibility(visibility.toProto());
        if (pipelined) {
            sendPipelined(request);
        } else {
            sendAndWait(request, batch);
        }
    }

    /** Sends an add and waits for its answer: over the watch when open, else as {@code AddMessages}. */
    private void sendAndWait(AddMessagesRequest.Builder request, List<dev.agentscopememory.grpc.v1.Msg> batch) {
        Snapshot before = snapshot.get();
        AddMessagesResponse response = null;
        // Whether this write was our watch's own (not announced to it): true for an add over the
        // watch, and for a unary add naming the watch.
        boolean own = false;
        try {
            if (watch != null) {
                // Over the open watch, when there is one (far cheaper than a call of its own); null
                // when there is none or it ended before the answer: then as AddMessages below.
                response = watch.add(request.build(), connection.deadline().toNanos());
                own = response != null;
            }
            if (response == null) {
                AddMessagesRequest unary = request.setWatchId(watch == null ? "" : watch.watchId()).build();
                own = !unary.getWatchId().isEmpty();
                response = connection.call("MemoryService/AddMessages", true,
                        () -> connection.memoryService().addMessages(unary));
                if (own) {
                    // The server did not announce this add to our own watch: we learn it from here.
                    watch.ownWrite(response.getPreviousEtag(), response.getEtag());
                }
            }
        } catch (RuntimeException e) {
            if (watch != null) {
                // The add may have been stored without our watch being told (it was the writer's):
                // stop trusting the copy; a new watch starts from the server's current etag.
                watch.restart();
            }
            throw e;
        }
        if (before != null && !response.getEtag().isEmpty() && before.etag().equals(response.getPreviousEtag())) {
            // Nothing else changed the memory since the snapshot: the server now holds it plus this batch.
            snapshot.compareAndSet(before, before.then(response.getEtag(), MsgConverter.fromProto(batch)));
        }
        if (own && response.getEtag().isEmpty()) {
            // A replay (an earlier attempt was stored, its answer lost): our watch was not told
            // and this answer does not say what changed. Start over from the server's etag.
            watch.restart();
        }
        // Otherwise the snapshot stays: it still names an earlier state, so the next read gets what
        // was added since (another client's messages and this batch) as a delta, or everything.
    }

    // ---------------------------------------------------------------- pipelined adds

    /**
     * Queues an add that does not wait: its messages show in reads at once. It is held back for
     * at most {@link #HOLD_NANOS}, so an add right after it goes out with it, as one request; the
     * next add that waits, {@link #flush()} and every call that reaches the server send it sooner.
     */
    private void sendPipelined(AddMessagesRequest.Builder builder) {
        AddMessagesRequest request = builder.build();
        List<Msg> messages = MsgConverter.fromProto(request.getMessagesList());
        synchronized (pipelineLock) {
            throwPendingFailure();
            PendingAdd held = heldAdd();
            if (held != null && !held.fits(request)) {
                sendHeld();
                held = null;
            }
            synchronized (copyLock) {
                if (held != null) {
                    pending.remove(held);
                }
                pending.addLast(held == null ? new PendingAdd(request, messages) : held.then(request, messages));
            }
            if (!exitFlushed) {
                // Once: listed until close(), a synchronized map insert per add would be wasted.
                ExitFlush.register(this);
                exitFlushed = true;
            }
            if (!watch.takesAdds()) {
                // No open watch to send it over later without waiting: it goes now, and waits (as AddMessages).
                sendHeld();
            } else if (holdTimer == null) {
                holdTimer = HeldAdds.sendLater(this::sendHeldInBackground, holdNanos);
            }
        }
    }

    /** The add held back from sending (the last pending one, not sent yet), or null. */
    private PendingAdd heldAdd() {
        synchronized (copyLock) {
            PendingAdd last = pending.peekLast();
            return last != null && last.sent == null ? last : null;
        }
    }

    /** The hold ran out with nothing else sending the held add: sends it, keeping a failure for the next call. */
    private void sendHeldInBackground() {
        synchronized (pipelineLock) {
            holdTimer = null;
            try {
                sendHeld();
            } catch (RuntimeException e) {
                keepFailure(e);
            }
        }
    }

    private void keepFailure(RuntimeException e) {
        synchronized (copyLock) {
            if (pendingFailure == null) {
                pendingFailure = e;
            }
        }
    }

    /**
     * With {@link #pipelineLock} held: sends the held add, if any, over the watch without waiting
     * for its answer. Without an open watch that takes adds, waits for the adds before it and
     * sends its parts as {@link #sendAndWait} does (throwing the first failure).
     */
    private void sendHeld() {
        if (holdTimer != null) {
            holdTimer.cancel(false);
            holdTimer = null;
        }
        PendingAdd add = heldAdd();
        if (add == null) {
            return;
        }
        long onStream;
        synchronized (copyLock) {
            PendingAdd first = pending.peekFirst();
            onStream = first == null || first.sent == null ? -1 : first.sent.generation();
        }
        if (onStream >= 0 && (anyOrphaned() || overdue())) {
            // Adds left by an ended stream go again (as AddMessages) before this one.
            awaitSent();
            onStream = -1;
        }
        MessageWatch.Sent sent = watch.addPipelined(add.request, onStream, answer -> answered(add, answer));
        if (sent != null) {
            add.sent = sent;
            return;
        }
        synchronized (copyLock) {
            pending.remove(add);
        }
        awaitSent();
        sendParts(add);
    }

    /** Sends each part of {@code add} as it would have gone alone, in order; throws the first failure once all went. */
    private void sendParts(PendingAdd add) {
        RuntimeException first = null;
        for (AddMessagesRequest part : add.parts) {
            try {
                sendAndWait(part.toBuilder(), part.getMessagesList());
            } catch (RuntimeException e) {
                synchronized (copyLock) {
                    snapshot.set(null);
                }
                if (first == null) {
                    first = e;
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** Takes in a pipelined add's answer (on the stream's thread, before the watch takes its etag). */
    private void answered(PendingAdd add, MessagesAdded answer) {
        synchronized (copyLock) {
            if (answer.hasFailure() && add.parts.size() > 1) {
                // Nothing of it was stored: its adds go again one by one (flush), so each fails or
                // is stored as it would have alone. Reads ask the server until then.
                add.split = true;
                return;
            }
            pending.remove(add);
            if (answer.hasFailure()) {
                if (pendingFailure == null) {
                    pendingFailure = MessageWatch.failure(answer.getFailure());
                }
                // The next read asks the server for all it holds, not this copy.
                snapshot.set(null);
                return;
            }
            AddMessagesResponse response = answer.getResponse();
            Snapshot before = snapshot.get();
            if (before == null || response.getEtag().isEmpty() || !before.etag().equals(response.getPreviousEtag())
                    || !snapshot.compareAndSet(before, before.then(response.getEtag(), add.messages))) {
                // Not the state this add followed (another change came between): read it all again.
                snapshot.set(null);
            }
        }
    }

    private static List<Msg> concat(List<Msg> first, List<Msg> then) {
        List<Msg> all = new ArrayList<>(first.size() + then.size());
        all.addAll(first);
        all.addAll(then);
        return List.copyOf(all);
    }

    private boolean anyOrphaned() {
        synchronized (copyLock) {
            for (PendingAdd p : pending) {
                if (p.orphaned() || p.split) {
                    return true;
                }
            }
            return false;
        }
    }

    /** The oldest pending add has waited for its answer longer than the connection's deadline. */
    private boolean overdue() {
        synchronized (copyLock) {
            PendingAdd first = pending.peekFirst();
            return first != null && System.nanoTime() - first.sentNanos > connection.deadline().toNanos();
        }
    }

    /** Throws (once) the failure of a pipelined add answered since the last call. */
    private void throwPendingFailure() {
        RuntimeException failure;
        synchronized (copyLock) {
            failure = pendingFailure;
            pendingFailure = null;
        }
        if (failure != null) {
            throw failure;
        }
    }

    /**
     * Sends the add held back, if any ({@link #HOLD_NANOS}), then waits until every add sent
     * without waiting ({@link AddConfirmation}) is answered, and throws the first failure among them (as {@code AddMessages} would have; the failure is thrown once).
     * Adds whose watch stream ended before their answer are sent again first, in order, as {@code
     * AddMessages} with their request ids (which stores nothing twice). An add not answered
     * within the connection's deadline throws {@link RemoteMemoryException.DeadlineExceeded} (it
     * may or may not be stored, as with a call that ran out of time). After {@code flush()}
     * returns, every add made before it is durable. Every other call that reaches the server
     * (deletes, clears, state, a read the copy cannot answer) flushes first, and {@link #close()}
     * does, and so does the JVM's exit. With {@link AddConfirmation#EVERY_ADD} (or without
     * coherent caching), adds are acknowledged before they return and this does nothing.
     *
     * @throws RemoteMemoryException the first failure of a pending add
     */
    public void flush() {
        if (!pipelined) {
            return;
        }
        synchronized (pipelineLock) {
            try {
                sendHeld();
            } catch (RuntimeException e) {
                keepFailure(e);
            }
            awaitSent();
            throwPendingFailure();
        }
    }

    /**
     * With {@link #pipelineLock} held: waits until every add sent is answered, sending again those
     * whose stream ended first (and, one by one, the parts of those that failed as a whole); keeps
     * the first failure for {@link #throwPendingFailure}.
     */
    private void awaitSent() {
        RuntimeException first = null;
        while (true) {
            PendingAdd add;
            synchronized (copyLock) {
                add = pending.peekFirst();
            }
            if (add == null || add.sent == null) {
                break;
            }
            try {
                MessageWatch.Sent sent = add.sent;
                long left = connection.deadline().toNanos() - (System.nanoTime() - add.sentNanos);
                sent.answer().get(Math.max(left, 0), TimeUnit.NANOSECONDS);
                // Answered: answered() took it in (and out of pending), unless it is to be split.
                synchronized (copyLock) {
                    pending.remove(add);
                }
                if (add.split) {
                    try {
                        sendParts(add);
                    } catch (RuntimeException e) {
                        if (first == null) {
                            first = e;
                        }
                    }
                }
                continue;
            } catch (ExecutionException streamEnded) {
                // sent again below
            } catch (TimeoutException e) {
                synchronized (copyLock) {
                    pending.remove(add);
                    snapshot.set(null);
                }
                // Its fate is unknown and our watch may never hear of it: start over.
                watch.restart();
                if (first == null) {
                    first = RemoteMemoryException.of("MemoryService/AddMessages", Status.DEADLINE_EXCEEDED
                            .withDescription("no answer to a pipelined add within the deadline").asRuntimeException());
                }
                continue;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new RemoteMemoryException("MemoryService/AddMessages", Status.Code.CANCELLED, "interrupted", e);
            }
            synchronized (copyLock) {
                pending.remove(add);
            }
            try {
                // The same request id: whatever of it the server stored is not stored twice.
                sendAndWait(add.request.toBuilder(), add.request.getMessagesList());
            } catch (RuntimeException e) {
                synchronized (copyLock) {
                    snapshot.set(null);
                }
                RuntimeException failure = e;
                if (add.parts.size() > 1 && refused(e)) {
                    // The server refused the whole, so stored none of it: each part as it would have gone.
                    try {
                        sendParts(add);
                        failure = null;
                    } catch (RuntimeException partFailure) {
                        failure = partFailure;
                    }
                }
                if (first == null) {
                    first = failure;
                }
            }
        }
        if (first != null) {
            keepFailure(first);
        }
    }

    /** A failure by which the server refused an add outright (it stored none of it). */
    private static boolean refused(RuntimeException e) {
        if (!(e instanceof RemoteMemoryException r)) {
            return false;
        }
        return switch (r.getCode()) {
            case INVALID_ARGUMENT, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, OUT_OF_RANGE, NOT_FOUND, PERMISSION_DENIED -> true;
            default -> false;
        };
    }

    /** A call that reaches the server: pending adds first, so the server sees what this client did, in order. */
    <T> T call(String operation, boolean retryable, Supplier<T> rpc) {
        flush();
        return connection.call(operation, retryable, rpc);
    }

    /** How often a read the server aborted (the memory changed between pages) starts again. */
    static final int CONSISTENT_READ_ATTEMPTS = PagedRead.CONSISTENT_READ_ATTEMPTS;

    /**
     * All messages in insertion order, as a new mutable list of new messages. Always asks the
     * server; when the messages have not changed since this client last saw them, the server says
     * so instead of sending them again, and when messages were only added, it sends just those.
     * With {@code coherentCache}, while the watch's lease is fresh and no change was announced, it
     * does not ask at all. A history of several pages is one state of the memory: when it changes
     * between pages (a compression rewrites it) the server aborts the read, which starts again from
     * the first page, at most {@link #CONSISTENT_READ_ATTEMPTS} times; then {@link
     * RemoteMemoryException.Aborted} is thrown. A mixed list is never returned.
     */
    @Override
    public List<Msg> getMessages() {
        List<Msg> own = ownMessages();
        if (!includeInherited) {
            return own;
        }
        List<Msg> all = getInheritedMessages();
        inheritedSeen = all.size();
        all.addAll(own);
        return all;
    }

    /**
     * This memory's own messages, without inherited ones (what {@link #getMessages()} returns
     * unless {@code includeInherited}); what {@code saveTo} saves.
     */
    public List<Msg> ownMessages() {
        List<Msg> own = currentOwnMessages();
        if (indexesLastRead()) {
            // Taken before the caller holds the list: what it does to it is not what it read.
            LastRead read = new LastRead(own instanceof CopiedOnRead c ? c.source() : List.copyOf(own));
            synchronized (lastReadLock) {
                lastRead = read;
            }
        }
        return own;
    }

    /**
     * Whether {@link #deleteMessage} indexes the list the caller last read (plain memories, whose
     * messages only this API adds and removes) or the current one (kinds whose server rewrites
     * messages itself: compression, tier passes).
     */
    protected boolean indexesLastRead() {
        return false;
    }

    /** Forgets the list the caller last read (its contents were replaced): indexes name the current one. */
    protected final void forgetLastRead() {
        synchronized (lastReadLock) {
            lastRead = null;
        }
    }

    /** The own messages now, as {@link #ownMessages()} returns them, without taking them as the caller's last read. */
    List<Msg> currentOwnMessages() {
        if (watch != null) {
            createWithWatch();
        }
        ensureMemory();
        if (watch != null) {
            watch.ensureOpen();
            List<Msg> fromCopy = readFromCopy();
            if (fromCopy != null) {
                return fromCopy;
            }
            flush();
        }
        for (int attempt = 1; ; attempt++) {
            Snapshot cached = snapshot.get();
            List<dev.agentscopememory.grpc.v1.Msg> wire = new ArrayList<>();
            String token = "";
            String firstEtag = null;
            try {
                do {
                    GetMessagesRequest.Builder request = GetMessagesRequest.newBuilder()
                            .setMemoryId(memoryId)
                            .setPageSize(pageSize)
                            .setPageToken(token);
                    if (firstEtag == null && cached != null) {
                        request.setIfNoneMatch(cached.etag()).setAcceptDelta(true);
                    }
                    GetMessagesRequest built = request.build();
                    GetMessagesResponse page = connection.call("MemoryService/GetMessages", true,
                            () -> connection.memoryService().getMessages(built));
                    if (page.getNotModified()) {
                        return cached.read(List.of());
                    }
                    if (page.getDelta()) {
                        // Only added since the cached state: the cached messages, then these.
                        Snapshot current = cached.then(page.getEtag(), MsgConverter.fromProto(page.getMessagesList()));
                        snapshot.compareAndSet(cached, current);
                        return current.read(List.of());
                    }
                    if (firstEtag == null) {
                        firstEtag = page.getEtag();
                    } else if (!firstEtag.equals(page.getEtag())) {
                        // Only a server older than snapshot-bound tokens gets here.
                        throw new RemoteMemoryException.Aborted("MemoryService/GetMessages",
                                "memory " + memoryId + " changed between pages", null);
                    }
                    wire.addAll(page.getMessagesList());
                    token = page.getNextPageToken();
                } while (!token.isEmpty());
            } catch (RemoteMemoryException.Aborted e) {
                if (attempt >= CONSISTENT_READ_ATTEMPTS) {
                    throw e;
                }
                continue;
            }
            Snapshot read = new Snapshot(firstEtag, List.copyOf(MsgConverter.fromProto(wire)));
            snapshot.compareAndSet(cached, firstEtag.isEmpty() ? null : read);
            return read.read(List.of());
        }
    }

    /**
     * The messages from this client's copy (and its adds on their way) when the watch says the
     * copy is current, else null. The stream's thread moves the copy first and the watch's etag
     * after it, so a read in between finds them apart for a moment: it looks again (a few times)
     * rather than ask the server.
     */
    private List<Msg> readFromCopy() {
        for (int look = 0; look < 3; look++) {
            Snapshot cached;
            List<Msg> ahead = new ArrayList<>();
            boolean orphans = false;
            synchronized (copyLock) {
                throwPendingFailure();
                cached = snapshot.get();
                for (PendingAdd p : pending) {
                    ahead.addAll(p.messages);
                    orphans |= p.orphaned() || p.split;
                }
            }
            if (cached == null || orphans || overdue()) {
                return null;
            }
            if (watch.current(cached.etag())) {
                // Lease fresh, no change announced since this copy; this client's own adds on
                // their way follow it.
                return cached.read(ahead);
            }
            if (snapshot.get() == cached) {
                return null; // not a move under way: the copy is behind
            }
        }
        return null;
    }

    /** Whether the coherent cache's watch stream is open (for tests). */
    boolean watchOpen() {
        return watch != null && watch.isOpen();
    }

    /** Whether adds sent without waiting are not answered yet (for tests). */
    boolean hasPendingAdds() {
        synchronized (copyLock) {
            return !pending.isEmpty();
        }
    }

    /** Whether an add is held back, not sent yet ({@link #HOLD_NANOS}; for tests). */
    boolean holdsAnAdd() {
        return heldAdd() != null;
    }

    /** Whether the next {@link #ownMessages()} would be answered from the cached copy, with no call. */
    boolean servesFromCache() {
        Snapshot cached = snapshot.get();
        return watch != null && cached != null && watch.current(cached.etag());
    }

    /**
     * Deletes the message at {@code index}; an index out of range (negative too) does nothing.
     * With {@code includeInherited}, the index is a position in the list {@link #getMessages()}
     * last returned or {@link #messageCount()} last counted (before either, in the current one):
     * an inherited message there is read-only (nothing is deleted), and one of this memory's own
     * is deleted whatever its parents shared or deleted since. On a plain memory ({@link
     * RemoteMemory}) an own message's index is a position in the list {@link #getMessages()} last
     * returned, followed by this client's adds since: the message there is deleted wherever other
     * clients' deletes moved it, and nothing when another client deleted it already. The server
     * deletes only the message of that id ({@code expected_message_id}); a change in between makes
     * the client look again, at most {@link #DELETE_ATTEMPTS} times, then {@link
     * RemoteMemoryException.Aborted} is thrown.
     */
    @Override
    public void deleteMessage(int index) {
        if (index < 0) {
            return;
        }
        if (includeInherited) {
            // Inherited messages come first in getMessages() and are read-only here.
            int seen = inheritedSeen;
            int inherited = seen >= 0 ? seen : getInheritedMessages().size();
            if (index < inherited) {
                return;
            }
            index -= inherited;
        }
        ensureMemory();
        flush();
        List<String> seen;
        synchronized (lastReadLock) {
            seen = lastRead == null ? null : new ArrayList<>(lastRead.ids());
        }
        if (seen != null && index >= seen.size()) {
            return; // past the end of the list the caller knows
        }
        String meant = seen == null ? null : seen.get(index);
        int earlier = 0; // how many messages of the same id precede it (ids are rarely repeated)
        for (int i = 0; meant != null && i < index; i++) {
            earlier += meant.equals(seen.get(i)) ? 1 : 0;
        }
        for (int attempt = 1; ; attempt++) {
            List<Msg> read = currentOwnMessages();
            // Its ids only: the cached messages, not a copy of each.
            List<Msg> current = read instanceof CopiedOnRead c ? c.source() : read;
            int at = index;
            String expected;
            if (meant == null) {
                if (at >= current.size()) {
                    return;
                }
                expected = current.get(at).getId();
            } else {
                at = position(current, meant, earlier);
                if (at < 0) {
                    forgetAt(index); // another client deleted it already
                    return;
                }
                expected = meant;
            }
            DeleteMessageRequest.Builder request = DeleteMessageRequest.newBuilder().setMemoryId(memoryId).setIndex(at);
            if (expected != null) {
                request.setExpectedMessageId(expected);
            }
            DeleteMessageRequest built = request.build();
            Snapshot before = snapshot.getAndSet(null);
            DeleteMessageResponse response;
            try {
                // Not retried: deleting "the message at i" twice would delete two messages.
                response = connection.call("MemoryService/DeleteMessage", false,
                        () -> connection.memoryService().deleteMessage(built));
            } catch (RemoteMemoryException.Aborted e) {
                if (attempt >= DELETE_ATTEMPTS) {
                    throw e;
                }
                continue; // the list changed since it was read here: look again
            }
            keepAfterDelete(before, response, at, expected);
            forgetAt(index);
            return;
        }
    }

    /** How often {@link #deleteMessage} looks for its message again when the list keeps changing. */
    static final int DELETE_ATTEMPTS = 5;

    /** The position in {@code messages} of the message with id {@code id} that follows {@code earlier} others of that id; -1 if none. */
    private static int position(List<Msg> messages, String id, int earlier) {
        int left = earlier;
        for (int i = 0; i < messages.size(); i++) {
            if (id.equals(messages.get(i).getId()) && left-- == 0) {
                return i;
            }
        }
        return -1;
    }

    /**
     * The copy after this client's own delete, without reading the list again: when the delete's
     * {@code previous_etag} names the copy's state, the delete was the only change since, and the
     * copy without the message at {@code at} (the one the server checked had id {@code expected})
     * is the state its {@code etag} names. Otherwise (another client changed the memory in
     * between, or an older server sent no etags) the next read fetches the list as before. A copy
     * another read put in place meanwhile is kept.
     */
    private void keepAfterDelete(Snapshot before, DeleteMessageResponse response, int at, String expected) {
        if (before == null || response.getEtag().isEmpty() || !before.etag().equals(response.getPreviousEtag())) {
            return;
        }
        if (!response.getDeleted()) {
            snapshot.compareAndSet(null, before); // nothing changed: the same state, the same etag
            return;
        }
        if (at < before.messages().size() && (expected == null || expected.equals(before.messages().get(at).getId()))) {
            snapshot.compareAndSet(null, before.without(response.getEtag(), at));
        }
    }

    private void forgetAt(int index) {
        synchronized (lastReadLock) {
            if (lastRead != null && index < lastRead.ids().size()) {
                lastRead.ids().remove(index);
            }
        }
    }

    @Override
    public void clear() {
        ensureMemory();
        ClearMessagesRequest request = ClearMessagesRequest.newBuilder().setMemoryId(memoryId).build();
        flush();
        snapshot.set(null);
        ClearMessagesResponse response = connection.call("MemoryService/ClearMessages", true,
                () -> connection.memoryService().clearMessages(request));
        if (!response.getEtag().isEmpty()) {
            // No messages, named by the clear's etag whatever came before it: the next read is
            // answered "not modified" (or with what others added since) instead of a whole read.
            snapshot.compareAndSet(null, new Snapshot(response.getEtag(), List.of()));
        }
        synchronized (lastReadLock) {
            if (lastRead != null) {
                lastRead.ids().clear();
            }
        }
    }

    /**
     * Replaces the memory's state with {@code entries} (AgentScope's {@code loadFrom}: streamed in
     * pieces, applied atomically) and keeps {@code messages} as the copy, named by the load's
     * etag: the load makes them the memory's messages whatever it held before, so the next read
     * is answered "not modified" (or with what others added since) instead of reading the whole
     * history back. A failed load changed nothing: the copy stays as it was (its etag still names
     * its state, so a load whose answer alone was lost is caught by the next read).
     *
     * @param entries the state entries
     * @param messages the messages {@link #getMessages()} returns right after the load (its own),
     *     in order; null when the kind's messages are not the loaded list as it is (the server
     *     derives them): the next read fetches them
     * @throws RemoteMemoryException.Unimplemented from a server without {@code StreamLoadState}
     */
    final void loadState(List<StateEntry> entries, List<Msg> messages) {
        ensureMemory();
        flush();
        Snapshot before = snapshot.getAndSet(null);
        RemoteState.Loaded loaded;
        try {
            loaded = RemoteState.loadWithEtags(connection, memoryId, entries, null);
        } catch (RuntimeException e) {
            snapshot.compareAndSet(null, before);
            throw e;
        }
        if (messages == null || loaded.etag().isEmpty()) {
            return; // a server older than etags on loads: the next read fetches the list
        }
        // As a read would return them (and as an add of them leaves the copy), and none of the
        // caller's objects, which it may change after the load. A copy another read put in
        // place meanwhile is kept.
        List<Msg> stored = List.copyOf(MsgConverter.fromProto(MsgConverter.toProto(messages)));
        snapshot.compareAndSet(null, new Snapshot(loaded.etag(), stored));
    }

    /**
     * The messages this memory inherits, read-only and in the server's order: its ancestors'
     * SHARED and GLOBAL messages (the root's first), then the tenant's other GLOBAL messages. They
     * lead {@link #getMessages()} only when the builder's {@code includeInherited} is on (the
     * default for a memory built with a parent), and are never part of its saved state.
     */
    public List<Msg> getInheritedMessages() {
        return MsgConverter.fromProto(inheritedWire());
    }

    private List<dev.agentscopememory.grpc.v1.Msg> inheritedWire() {
        ensureMemory();
        List<dev.agentscopememory.grpc.v1.Msg> wire = new ArrayList<>();
        String token = "";
        do {
            ListInheritedMessagesRequest request = ListInheritedMessagesRequest.newBuilder()
                    .setMemoryId(memoryId).setPageSize(pageSize).setPageToken(token).build();
            ListInheritedMessagesResponse page = call("ScopeService/ListInheritedMessages", true,
                    () -> connection.scopeService().listInheritedMessages(request));
            for (InheritedMessage m : page.getMessagesList()) {
                wire.add(m.getMessage());
            }
            token = page.getNextPageToken();
        } while (!token.isEmpty());
        return wire;
    }

    /**
     * How many messages {@link #getMessages()} would return, without transferring this memory's
     * own (the inherited ones, which lead the list with {@code includeInherited}, are read to be
     * counted: the server has no count of them). With {@code includeInherited}, {@link
     * #deleteMessage} then indexes the list counted here, so {@code deleteMessage(messageCount() -
     * 1)} deletes the last message whatever the parents shared before.
     */
    public long messageCount() {
        ensureMemory();
        GetMemoryRequest request = GetMemoryRequest.newBuilder().setMemoryId(memoryId).build();
        long own = call("MemoryService/GetMemory", true,
                () -> connection.memoryService().getMemory(request)).getMemory().getMessageCount();
        if (!includeInherited) {
            return own;
        }
        int inherited = inheritedWire().size();
        inheritedSeen = inherited;
        return inherited + own;
    }

    // ---------------------------------------------------------------- lifecycle

    /**
     * On first use: creates the memory when {@code createIfMissing} (the default), and attaches it
     * to the builder's parent, if any (an existing memory too: a missing one is then NOT_FOUND).
     */
    protected void ensureMemory() {
        if (ensured || (!createIfMissing && parentMemoryId == null)) {
            return;
        }
        synchronized (createLock) {
            if (ensured) {
                return;
            }
            if (createIfMissing) {
                CreateMemoryRequest built = createRequest();
                connection.call("MemoryService/CreateMemory", true,
                        () -> connection.memoryService().createMemory(built));
            }
            if (parentMemoryId != null) {
                setParent();
            }
            ensured = true;
        }
    }

    private void setParent() {
        SetParentRequest parent = SetParentRequest.newBuilder()
                .setMemoryId(memoryId).setParentMemoryId(parentMemoryId).build();
        connection.call("ScopeService/SetParent", true, () -> connection.scopeService().setParent(parent));
    }

    private CreateMemoryRequest createRequest() {
        CreateMemoryRequest.Builder request = CreateMemoryRequest.newBuilder()
                .setMemoryId(memoryId)
                .setKind(WireEnums.toProto(kind))
                .putAllLabels(labels)
                .setAllowExisting(true);
        if (autoContextConfig != null) {
            request.setAutoContextConfig(autoContextConfig);
        }
        configureCreate(request);
        return request.build();
    }

    /**
     * Before the first read, with coherent caching: creates the memory (if missing) and starts the
     * watch in one round trip, instead of a {@code CreateMemory} call and then a read; a memory
     * with no messages yet (a new conversation) then needs no read at all. Leaves the memory
     * unensured when the watch could not do it (a server without coherent caching, or one that
     * refused the create): {@link #ensureMemory} then calls {@code CreateMemory}, which reports
     * any error. A memory built with a parent is attached to it right after ({@code SetParent},
     * as {@link #ensureMemory} does), before anything is read; when that fails, the memory stays
     * unensured and the next call attaches it again.
     */
    private void createWithWatch() {
        if (ensured || !createIfMissing) {
            return;
        }
        synchronized (createLock) {
            if (ensured) {
                return;
            }
            MessageWatch.Started started = watch.openCreating(createRequest(), connection.deadline().toNanos());
            if (started == null) {
                return;
            }
            if (parentMemoryId != null) {
                setParent();
            }
            ensured = true;
            if (started.messageCount() == 0 && !started.etag().isEmpty()) {
                snapshot.compareAndSet(null, new Snapshot(started.etag(), List.of()));
            }
        }
    }

    /** Adds a kind's own configuration to the request that creates the memory on first use. */
    void configureCreate(CreateMemoryRequest.Builder request) {}

    /**
     * Makes a conversation left with unanswered tool calls usable again: a process or server that
     * died during a tool call leaves the last assistant message with tool calls that have no
     * result, and ReActAgent then refuses every further call ("pending tool calls exist"). This
     * appends, for each such call, a TOOL message with an error result saying the call was
     * interrupted ({@link PendingToolCalls#INTERRUPTED}), as AgentScope 1.0.12's
     * {@code enablePendingToolRecovery(true)} would at the agent's next call. Nothing happens when
     * no call is pending.
     *
     * @param agentName the name of the agent the results are from (ReActAgent names its tool
     *     results after itself)
     * @return the messages added, empty when no call was pending
     */
    public List<Msg> closePendingToolCalls(String agentName) {
        flush();
        List<Msg> added = PendingToolCalls.interruptedResults(currentOwnMessages(), agentName);
        if (!added.isEmpty()) {
            addMessages(added);
            log.warn("memory {}: answered {} interrupted tool call(s) with an error result", memoryId, added.size());
        }
        return added;
    }

    /**
     * Closes the connection if this memory created it. The stored messages are kept. With adds
     * pending, first waits for them ({@link #flush()}), and throws the first failure among them
     * once all is closed.
     */
    @Override
    public void close() {
        try {
            flush();
        } finally {
            ExitFlush.unregister(this);
            if (watch != null) {
                watch.close();
            }
            if (ownsConnection) {
                connection.close();
            }
        }
    }

    /** Options shared by the remote memories' builders. */
    @SuppressWarnings("unchecked")
    public abstract static class AbstractBuilder<B extends AbstractBuilder<B>> extends ConnectionOptions<B> {
        private String memoryId;
        private boolean createIfMissing = true;
        private final Map<String, String> labels = new LinkedHashMap<>();
        private int pageSize;
        private String parentMemoryId;
        private Visibility visibility = Visibility.LOCAL;
        private Boolean includeInherited;
        private boolean coherentCache = true;
        private AddConfirmation addConfirmation = AddConfirmation.MODEL_OUTPUT;
        private Duration watchIdleTimeout = Duration.ofSeconds(60);

        protected AbstractBuilder() {}

        /**
         * Coherent caching (default on): the memory watches its messages on the server
         * ({@code MemoryService.WatchMessages}) with a short lease it renews in the background, and
         * {@link #getMessages()} answers from its own copy, with no call, while the lease is fresh
         * and no change was announced. Every guarantee stays: the server acknowledges any client's
         * write only after this memory took in the change (or its lease ran out), so a read after
         * an acknowledged write sees it. The cost: each write to a watched memory waits for its
         * other watchers (one round trip, up to a lease of 2 s when a watcher stalls), and each
         * memory in use keeps a stream open (released after {@link #watchIdleTimeout} unused).
         * Servers that cannot see every write (PostgreSQL replicas) refuse the watch, and reads
         * stay conditional ({@code if_none_match}), as they do whenever the stream is down. While
         * the watch is open, adds travel over it too (cheaper than an {@code AddMessages} call
         * each; same answers, errors and durability), and only some of them wait for their
         * answers ({@link #addConfirmation}); when it breaks before an add's answer, the add is
         * sent again as {@code AddMessages} with the same request id, which stores nothing twice.
         * Off: every read and every add is a call of its own. Call {@link #close()} to end the
         * watch.
         */
        public B coherentCache(boolean coherentCache) {
            this.coherentCache = coherentCache;
            return (B) this;
        }

        /**
         * Which adds wait for the server's confirmation (default {@link
         * AddConfirmation#MODEL_OUTPUT}: the model's output waits, and with it every add before
         * it; user input and tool results go ahead). Applies with {@link #coherentCache} only:
         * without it every add waits. Adds that do not wait are sent over the watch and show in
         * this memory's reads at once; they are applied in the order sent, each on its own, and a
         * failed one (the same {@link RemoteMemoryException} as {@code AddMessages}) is thrown by
         * the next call of this memory that waits (the next add that waits, {@link
         * AbstractRemoteMemory#flush()}, any call that reaches the server, {@link
         * AbstractRemoteMemory#close()}, or a read), which also drops the local copy so the next
         * read is the server's. When the watch breaks before their answers, pending adds are sent
         * again, in order, as {@code AddMessages} with their request ids at the next call (none
         * lost, none stored twice); one not answered within the connection's deadline throws
         * {@link RemoteMemoryException.DeadlineExceeded}. Other clients see an add only once it
         * is committed. Adds still pending when the JVM exits are flushed by a shutdown hook.
         */
        public B addConfirmation(AddConfirmation addConfirmation) {
            this.addConfirmation = Objects.requireNonNull(addConfirmation, "addConfirmation");
            return (B) this;
        }

        /**
         * {@code true}: {@code addConfirmation(ON_FLUSH)}, no add waits; {@code false}: {@code
         * addConfirmation(EVERY_ADD)}. Kept for earlier callers; see {@link #addConfirmation}.
         */
        public B pipelinedAdds(boolean pipelinedAdds) {
            return addConfirmation(pipelinedAdds ? AddConfirmation.ON_FLUSH : AddConfirmation.EVERY_ADD);
        }

        /**
         * How long the coherent cache's watch stays open without this memory being read or added
         * to (default 60 s): then it is released, so an idle conversation holds no stream and
         * sends no renewals, and the next read opens it again (that read, and those until the
         * server answers, are conditional calls). Not released while adds are pending.
         */
        public B watchIdleTimeout(Duration watchIdleTimeout) {
            Objects.requireNonNull(watchIdleTimeout, "watchIdleTimeout");
            if (watchIdleTimeout.isNegative() || watchIdleTimeout.isZero()) {
                throw new IllegalArgumentException("watchIdleTimeout: must be positive");
            }
            this.watchIdleTimeout = watchIdleTimeout;
            return (B) this;
        }

        /**
         * Make the memory a child of this one when it is first used (the parent must exist): it
         * then inherits the parent's SHARED and GLOBAL messages ({@link #getInheritedMessages()}).
         */
        public B parentMemoryId(String parentMemoryId) {
            this.parentMemoryId = Objects.requireNonNull(parentMemoryId, "parentMemoryId");
            return (B) this;
        }

        /**
         * Whether {@link #getMessages()} starts with the inherited messages (read-only: {@code
         * deleteMessage} indexes past them, {@code saveTo} leaves them out), so an agent's model
         * sees what its parents shared. Default: on when {@link #parentMemoryId} is given.
         */
        public B includeInherited(boolean includeInherited) {
            this.includeInherited = includeInherited;
            return (B) this;
        }

        /** The visibility of the messages this client adds (default {@link Visibility#LOCAL}). */
        public B visibility(Visibility visibility) {
            this.visibility = Objects.requireNonNull(visibility, "visibility");
            return (B) this;
        }

        /** The memory's id on the server (required). */
        public B memoryId(String memoryId) {
            this.memoryId = memoryId;
            return (B) this;
        }

        /**
         * Create the memory on first use if it does not exist (default true). When false, a
         * missing memory makes every call fail with {@link RemoteMemoryException.NotFound}.
         */
        public B createIfMissing(boolean createIfMissing) {
            this.createIfMissing = createIfMissing;
            return (B) this;
        }

        /** Labels given to the memory when this client creates it. */
        public B label(String key, String value) {
            Objects.requireNonNull(key, "label key");
            Objects.requireNonNull(value, "label value");
            // protobuf would send '?' for half a surrogate pair: another label than the one given.
            if (Utf16.loneSurrogateAt(key) >= 0) {
                throw new IllegalArgumentException("labels: a key contains a lone surrogate; it is not Unicode text");
            }
            labels.put(key, Utf16.checkText(value, "labels['" + key + "']"));
            return (B) this;
        }

        /** Messages per GetMessages page; 0 (default) lets the server choose (1000). */
        public B pageSize(int pageSize) {
            if (pageSize < 0) {
                throw new IllegalArgumentException("pageSize: must not be negative");
            }
            this.pageSize = pageSize;
            return (B) this;
        }
    }
}
