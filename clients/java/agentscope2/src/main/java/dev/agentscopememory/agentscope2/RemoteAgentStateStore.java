package dev.agentscopememory.agentscope2;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.agentscopememory.client.ConnectionOptions;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.internal.Utf16;
import dev.agentscopememory.grpc.v1.AgentStateServiceGrpc;
import dev.agentscopememory.grpc.v1.AppendListRequest;
import dev.agentscopememory.grpc.v1.AppendListResponse;
import dev.agentscopememory.grpc.v1.DeleteKeyRequest;
import dev.agentscopememory.grpc.v1.DeleteSessionRequest;
import dev.agentscopememory.grpc.v1.GetListRequest;
import dev.agentscopememory.grpc.v1.GetListResponse;
import dev.agentscopememory.grpc.v1.GetValueRequest;
import dev.agentscopememory.grpc.v1.GetValueResponse;
import dev.agentscopememory.grpc.v1.ListSessionIdsRequest;
import dev.agentscopememory.grpc.v1.ListSessionIdsResponse;
import dev.agentscopememory.grpc.v1.PutListRequest;
import dev.agentscopememory.grpc.v1.PutListResponse;
import dev.agentscopememory.grpc.v1.PutValueRequest;
import dev.agentscopememory.grpc.v1.SessionExistsRequest;
import dev.agentscopememory.grpc.v1.StateSlot;
import dev.agentscopememory.grpc.v1.StreamGetValueRequest;
import dev.agentscopememory.grpc.v1.StreamGetValueResponse;
import dev.agentscopememory.grpc.v1.StreamPutValueRequest;
import dev.agentscopememory.grpc.v1.StreamPutValueResponse;
import dev.agentscopememory.grpc.v1.WriteCondition;
import io.agentscope.core.state.AgentStateStore;
import io.agentscope.core.state.State;
import io.agentscope.core.util.JsonUtils;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An AgentScope-Java 2.x {@link AgentStateStore} kept on an agentscope-memory server
 * ({@code AgentStateService}), so that any replica of an agent resumes any session:
 *
 * <pre>{@code
 * RemoteAgentStateStore store = RemoteAgentStateStore.builder().target("memory:50051").build();
 * ReActAgent agent = ReActAgent.builder().name("Assistant").model(model).stateStore(store).build();
 * agent.call(msgs, RuntimeContext.builder().userId("alice").sessionId("chat-1").build()).block();
 * }</pre>
 *
 * <p>Values are serialised exactly as AgentScope's own stores serialise them ({@code
 * JsonUtils.getJsonCodec()}), and the server keeps them byte for byte, so a slot exported to a
 * {@code JsonFileAgentStateStore} directory ({@code agentscope-memory agent-state export}) is the
 * file AgentScope would have written. A {@code null} or blank user id is the anonymous user, as in
 * AgentScope's stores; the session id must not be blank.
 *
 * <p><b>Concurrency.</b> The server versions every value. A 2.0 {@code ReActAgent} calls {@code
 * get} at the start of a call and {@code save} at the end; this store remembers the version each
 * {@code get} returned and makes the {@code save} of that state a compare-and-set, resolved by the
 * {@link ConflictPolicy} (default {@link ConflictPolicy#MERGE_APPENDED}). A state the agent built
 * after its {@code get} found the slot absent is saved as a create, so agents of one process
 * sharing this store that start the same session at once do not overwrite each other's first
 * turn. A save that follows no
 * successful read of the slot only creates: over a stored state it is refused under {@code FAIL}
 * and {@code MERGE_APPENDED} (upstream #2741: a failed load makes the agent start from an empty
 * state and save it), so a transient error cannot wipe a session. {@link #supportsVersioning()}, {@link #getVersioned} and {@link #saveIfVersion} have
 * the signatures of upstream's post-2.0.0 {@code AgentStateStore} and take effect on releases that
 * call them.
 *
 * <p><b>Large states.</b> A 2.0 {@code ReActAgent} saves its whole state (its context with every
 * tool result and image) as one value after every call. Values larger than one gRPC message
 * carries ({@link #UNARY_VALUE_BYTES}, or the server's lower {@code max_state_value_bytes}) are
 * sent with {@code StreamPutValue} and read with {@code StreamGetValue}, in pieces of at most 1 MiB
 * cut between characters (never inside a surrogate pair), so a state of up to the server's {@code
 * max_state_streamed_value_bytes} (64 MiB by default) works over a channel with gRPC's default 4 MiB
 * message limit; smaller values take the one-message {@code PutValue} and {@code GetValue}. Either
 * way the write is atomic and the same compare-and-set, so every conflict policy below behaves the
 * same whatever the state's size.
 *
 * <p><b>Lists</b> ({@code save(u, s, key, List)}, used by the deprecated {@code Memory.saveTo}) are
 * sent whole the first time and then, while the list only grew since this process last read or
 * wrote it, as an append of the new items (O(appended) on the wire and in the store). A full
 * rewrite is last-writer-wins, as in AgentScope's stores.
 *
 * <p>Failures surface as {@link RemoteMemoryException} subclasses; conflicts as {@link
 * ConcurrentStateModificationException}.
 */
public class RemoteAgentStateStore implements AgentStateStore, AutoCloseable {

    /** Upstream's {@code AgentStateStore.UNVERSIONED}: an unconditional write, or a conflict. */
    public static final long UNVERSIONED = -1L;

    /**
     * The largest value (UTF-8 bytes) sent whole with {@code PutValue}: the server's default (and
     * greatest) {@code max_state_value_bytes}. Larger values go through {@code StreamPutValue}.
     */
    public static final int UNARY_VALUE_BYTES = 4 * 1024 * 1024 - 64 * 1024;

    /** UTF-16 units per piece of a streamed value: at most 3 UTF-8 bytes each, so at most 1 MiB. */
    private static final int PIECE_CHARS = 1024 * 1024 / 3;

    private static final Logger log = LoggerFactory.getLogger(RemoteAgentStateStore.class);
    private static final ObjectMapper TREES = new ObjectMapper();
    private static final Metadata.Key<String> CURRENT_VERSION =
            Metadata.Key.of("agentscope-memory-current-version", Metadata.ASCII_STRING_MARSHALLER);
    private static final Pattern CURRENT_VERSION_TEXT = Pattern.compile("current version (\\d+)$");
    /** Objects returned by get() whose version is remembered until they are saved. */
    private static final int MAX_REMEMBERED_READS = 4096;
    private static final int MAX_PAGE_RESTARTS = 5;
    /** Slots whose last state read or written is kept, the most recently used ones. */
    static final int REMEMBERED_SLOTS = 4096;

    private final RemoteConnection connection;
    private final boolean ownsConnection;
    private final ConflictPolicy conflictPolicy;
    private final int maxMergeAttempts;
    private final int pageSize;
    private final int unaryValueBytes;

    /**
     * What a read or a write of one value saw: its version and its JSON. {@code merged}: the
     * object saved holds {@code json}, while the write (a MERGE_APPENDED merge) stored more.
     */
    private record Seen(Slot slot, long version, String json, boolean merged) {
        Seen(Slot slot, long version, String json) {
            this(slot, version, json, false);
        }
    }

    /** A slot key: (user, session, key), the user normalised ("" is anonymous). */
    private record Slot(String userId, String sessionId, String key) {}

    /** A list as this process last read or wrote it. */
    private record ListSeen(long version, int length, byte[] digest) {}

    /**
     * An identity key: the very object get() returned, held weakly, so a state its caller dropped
     * (a 2.0 ReActAgent reads a state at the start of every call and saves a new object) is not
     * kept alive by this store. A cleared key is removed through {@link #droppedReads}.
     */
    private static final class ReadKey extends WeakReference<Object> {
        private final int hash;

        ReadKey(Object ref, ReferenceQueue<Object> queue) {
            super(ref, queue);
            this.hash = System.identityHashCode(ref);
        }

        @Override
        public boolean equals(Object o) {
            if (this == o) {
                return true;
            }
            Object ref = get();
            return o instanceof ReadKey other && ref != null && ref == other.get();
        }

        @Override
        public int hashCode() {
            return hash;
        }
    }

    private final Map<ReadKey, Seen> reads = Collections.synchronizedMap(new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<ReadKey, Seen> eldest) {
            return size() > MAX_REMEMBERED_READS;
        }
    });
    private final ReferenceQueue<Object> droppedReads = new ReferenceQueue<>();

    /**
     * Each slot's last state read or written here: the version a save expects and the base a
     * MERGE_APPENDED merge starts from (a 2.0 ReActAgent reads its state at the start of a call
     * and saves a new object at its end). Only the {@code rememberedSlots} most recently used are
     * kept, so a process serving many sessions does not hold every state it ever saw; a slot
     * forgotten between a read and its save (thousands of other slots used meanwhile) is saved
     * as one never read: only a create, else a {@link ConcurrentStateModificationException}.
     */
    private final Map<Slot, Seen> slots;
    /**
     * Reads of a slot that found it absent and whose fresh state is not saved yet, per slot. Each
     * stands for one caller (a 2.0 ReActAgent builds a new state after such a read): its save is
     * a create, whatever this process wrote to the slot since, so two agents of one process
     * starting the same session cannot overwrite each other's first turn. Bounded as {@link
     * #slots}: a read never followed by a save stays here (a 2.0 ReActAgent reads the legacy key
     * {@code toolkit_activeGroups} of every new session and never writes it), one more entry per
     * session for the life of the process. A forgotten one makes the save one never read: only a
     * create.
     */
    private final Map<Slot, Integer> absentReads;
    /** Each list's last version, length and digest, for appends; bounded as {@link #slots}. */
    private final Map<Slot, ListSeen> lists;

    protected RemoteAgentStateStore(Builder b) {
        this.connection = b.connectionOrOpen();
        this.ownsConnection = !b.sharesConnection();
        this.conflictPolicy = b.conflictPolicy;
        this.maxMergeAttempts = b.maxMergeAttempts;
        this.pageSize = b.pageSize;
        this.unaryValueBytes = b.unaryValueBytes;
        this.slots = recentlyUsed(b.rememberedSlots);
        this.absentReads = recentlyUsed(b.rememberedSlots);
        this.lists = recentlyUsed(b.rememberedSlots);
    }

    /** A synchronized map keeping its {@code capacity} most recently used entries. */
    private static <V> Map<Slot, V> recentlyUsed(int capacity) {
        return Collections.synchronizedMap(new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<Slot, V> eldest) {
                return size() > capacity;
            }
        });
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The connection this store talks through. */
    public RemoteConnection getConnection() {
        return connection;
    }

    /** How {@code save} resolves a concurrent modification. */
    public ConflictPolicy getConflictPolicy() {
        return conflictPolicy;
    }

    // ---------------------------------------------------------------- AgentStateStore

    /**
     * Stores a value; under {@link ConflictPolicy#FAIL} and {@link ConflictPolicy#MERGE_APPENDED}
     * only if the slot still holds the version this process read.
     *
     * @throws ConcurrentStateModificationException when another writer won and the policy does
     *     not resolve it
     */
    @Override
    public void save(String userId, String sessionId, String key, State value) {
        Objects.requireNonNull(value, "value");
        Slot slot = slot(userId, sessionId, key);
        String json = checkUnicode(JsonUtils.getJsonCodec().toJson(value), key);
        if (conflictPolicy == ConflictPolicy.OVERWRITE) {
            remember(slot, putValue(slot, json, null), json);
            return;
        }
        forgetDroppedReads();
        Seen base = reads.remove(new ReadKey(value, null));
        if (base == null || !base.slot().equals(slot)) {
            // Not an object get() returned (a fresh state). After a read that found the slot
            // absent it is that caller's first save: a create, even if another caller of this
            // store created the slot meanwhile (its version here is not this caller's).
            // Otherwise the slot's last read or write in this process decides.
            base = takeAbsentRead(slot) ? new Seen(slot, 0, null) : slots.get(slot);
        }
        if (base != null && base.merged()) {
            // Its last save was merged with another writer's: the stored state holds more than
            // this object, so a compare-and-set would drop what was merged in. Merge again.
            resolve(value, slot, base, json, false);
            return;
        }
        // Not read by this process (or its read failed): only a create is safe. Refusing to
        // overwrite is what keeps a failed load (upstream #2741) from wiping the stored state.
        boolean unread = base == null;
        try {
            saved(value, slot, putValue(slot, json, unread ? 0L : base.version()), json);
        } catch (Conflict conflict) {
            if (unread) {
                GetValueResponse current = conflict.retried ? getValue(slot) : null;
                if (current != null && current.getFound() && current.getJson().equals(json)) {
                    saved(value, slot, current.getVersion(), json); // our create landed; its reply was lost
                    return;
                }
                throw conflict(slot, conflict.currentVersion, "not saved: the slot holds a state this process has"
                        + " not read successfully (a failed read must not overwrite it)");
            }
            resolve(value, slot, base, json, conflict.retried);
        }
    }

    /**
     * Remembers a value stored as it is: a later save of the same object (a 2.0 ReActAgent's
     * {@code setPermissionMode} and {@code saveAgentState} save the state its call saved; a
     * caller of {@code saveIfVersion} may go on with {@code save}) is a compare-and-set against
     * this write, not against the slot's last read or the version {@code getVersioned} gave.
     * Without it such a save after an absent read that was never followed by a save (an {@code
     * agent.getPermissionMode(u, s)} before the first call, a first call that failed) counted as
     * a create: a conflict under FAIL, the context stored twice under MERGE_APPENDED.
     */
    private void saved(State value, Slot slot, long version, String json) {
        remember(slot, version, json);
        reads.put(new ReadKey(value, droppedReads), new Seen(slot, version, json));
    }

    /** Remembers a merged write: the store holds {@code merged}, the object saved {@code mine}. */
    private void savedMerged(State value, Slot slot, long version, String mine, String merged) {
        remember(slot, version, merged);
        reads.put(new ReadKey(value, droppedReads), new Seen(slot, version, mine, true));
    }

    private void resolve(State value, Slot slot, Seen base, String mine, boolean retried) {
        String sent = mine;
        for (int attempt = 0; ; attempt++) {
            GetValueResponse current = getValue(slot);
            if (retried && current.getFound() && current.getJson().equals(sent)) {
                // Our own write landed before its reply was lost: nothing to resolve.
                if (sent == mine) {
                    saved(value, slot, current.getVersion(), sent);
                } else {
                    savedMerged(value, slot, current.getVersion(), mine, sent);
                }
                return;
            }
            if (conflictPolicy != ConflictPolicy.MERGE_APPENDED) {
                throw conflict(slot, current.getVersion(), "another writer saved it since it was read");
            }
            String merged = mergeAppended(base.version() == 0 ? null : base.json(), mine,
                    current.getFound() ? current.getJson() : null);
            if (merged == null) {
                throw conflict(slot, current.getVersion(),
                        "another writer saved it since it was read, and this state did not only append to"
                                + " its context (cannot merge)");
            }
            sent = merged;
            try {
                long version = putValue(slot, merged, current.getVersion());
                log.info("merged a concurrent save of {} in session {} (version {})", slot.key(), slot.sessionId(), version);
                savedMerged(value, slot, version, mine, merged);
                return;
            } catch (Conflict again) {
                retried = again.retried;
                if (attempt + 1 >= maxMergeAttempts) {
                    throw conflict(slot, again.currentVersion, "the merge kept losing to other writers");
                }
            }
        }
    }

    /**
     * The stored state with the messages {@code mine} appended since {@code base} added to its
     * context, and with every other field {@code mine} changed since {@code base} (a permission
     * mode set by {@code setPermissionMode}, tool groups, tasks, plan mode) set as {@code mine} has
     * it; null when {@code mine} is not {@code base} plus appended messages.
     */
    static String mergeAppended(String base, String mine, String current) {
        try {
            JsonNode mineTree = TREES.readTree(mine);
            JsonNode baseTree = base == null ? TREES.createObjectNode() : TREES.readTree(base);
            if (!(mineTree instanceof ObjectNode mineObject) || !(mineObject.get("context") instanceof ArrayNode mineContext)) {
                return null;
            }
            ArrayNode baseContext = baseTree.get("context") instanceof ArrayNode a ? a : TREES.createArrayNode();
            if (base != null && !Objects.equals(baseTree.get("summary"), mineObject.get("summary"))) {
                return null; // compacted meanwhile: not an append
            }
            if (mineContext.size() < baseContext.size()) {
                return null;
            }
            for (int i = 0; i < baseContext.size(); i++) {
                if (!baseContext.get(i).equals(mineContext.get(i))) {
                    return null;
                }
            }
            if (current == null) {
                return mine;
            }
            JsonNode currentTree = TREES.readTree(current);
            if (!(currentTree instanceof ObjectNode merged) || !(merged.get("context") instanceof ArrayNode mergedContext)) {
                return null;
            }
            int from = baseContext.size();
            if (base == null) {
                // Begun from no stored state: a fresh state, or one the legacy loader built from a
                // 1.x session's messages, which another writer begun alike stored too. What it
                // shares with the stored context from the start is not its own to add again.
                while (from < mineContext.size() && from < mergedContext.size()
                        && mineContext.get(from).equals(mergedContext.get(from))) {
                    from++;
                }
            }
            for (int i = from; i < mineContext.size(); i++) {
                mergedContext.add(mineContext.get(i));
            }
            if (base != null) {
                // Without a base (a fresh state) nothing tells what this save changed: its fields
                // are the defaults a new state starts with (a random reply id, say), so the stored
                // ones stay.
                Set<String> names = new LinkedHashSet<>();
                baseTree.fieldNames().forEachRemaining(names::add);
                mineObject.fieldNames().forEachRemaining(names::add);
                names.remove("context");
                names.remove("summary"); // equal in base and mine (checked above): the stored one stays
                for (String name : names) {
                    JsonNode field = mergeField(baseTree.path(name), mineObject.path(name), merged.path(name));
                    if (field.isMissingNode()) {
                        merged.remove(name);
                    } else {
                        merged.set(name, field);
                    }
                }
            }
            return TREES.writeValueAsString(merged);
        } catch (java.io.IOException e) {
            return null;
        }
    }

    /**
     * A field of a merged save, three ways ({@code MissingNode}: absent): the stored one where this
     * save left it as it read it; else this save's, object fields merged one by one, so a change
     * another writer made beside it stays. Where both changed one value differently this save's
     * wins, as the last save does in AgentScope's own stores: a merge never fails (and loses the
     * turn's messages) over a setting.
     */
    private static JsonNode mergeField(JsonNode base, JsonNode mine, JsonNode current) {
        if (mine.equals(base)) {
            return current;
        }
        if (!(mine instanceof ObjectNode mineObject) || !(current instanceof ObjectNode currentObject)) {
            return mine;
        }
        ObjectNode out = currentObject.deepCopy();
        Set<String> names = new LinkedHashSet<>();
        currentObject.fieldNames().forEachRemaining(names::add);
        mineObject.fieldNames().forEachRemaining(names::add);
        base.fieldNames().forEachRemaining(names::add);
        for (String name : names) {
            JsonNode field = mergeField(base.path(name), mineObject.path(name), currentObject.path(name));
            if (field.isMissingNode()) {
                out.remove(name);
            } else {
                out.set(name, field);
            }
        }
        return out;
    }

    /**
     * Stores a list. While it only grew since this process last read or wrote it, just the new
     * items are sent.
     */
    @Override
    public void save(String userId, String sessionId, String key, List<? extends State> values) {
        Objects.requireNonNull(values, "values");
        Slot slot = slot(userId, sessionId, key);
        List<String> items = new ArrayList<>(values.size());
        for (State v : values) {
            items.add(checkUnicode(JsonUtils.getJsonCodec().toJson(v), key + "[" + items.size() + "]"));
        }
        ListSeen seen = lists.get(slot);
        if (seen != null && items.size() >= seen.length()
                && Arrays.equals(digest(items.subList(0, seen.length())), seen.digest())) {
            AppendListRequest request = AppendListRequest.newBuilder()
                    .setSlot(wire(slot)).setKey(key)
                    .addAllItems(items.subList(seen.length(), items.size()))
                    .setExpectedLength(seen.length())
                    .setCondition(WriteCondition.newBuilder().setExpectedVersion(seen.version()))
                    .build();
            try {
                AppendListResponse response = connection.call("AgentStateService/AppendList", true,
                        () -> connection.agentStateService().appendList(request));
                lists.put(slot, new ListSeen(response.getVersion(), items.size(), digest(items)));
                return;
            } catch (RemoteMemoryException e) {
                if (e.getCode() != Status.Code.ABORTED) {
                    throw e;
                }
                log.debug("list {} of session {} changed elsewhere; rewriting it whole", key, sessionId);
            }
        }
        PutListRequest request = PutListRequest.newBuilder()
                .setSlot(wire(slot)).setKey(key).addAllItems(items).build();
        PutListResponse response = connection.call("AgentStateService/PutList", true,
                () -> connection.agentStateService().putList(request));
        lists.put(slot, new ListSeen(response.getVersion(), items.size(), digest(items)));
    }

    @Override
    public <T extends State> Optional<T> get(String userId, String sessionId, String key, Class<T> type) {
        return getVersioned(userId, sessionId, key, type).asOptional();
    }

    @Override
    public <T extends State> List<T> getList(String userId, String sessionId, String key, Class<T> itemType) {
        Slot slot = slot(userId, sessionId, key);
        for (int restart = 0; ; restart++) {
            List<String> items = new ArrayList<>();
            String token = "";
            GetListResponse page;
            try {
                do {
                    GetListRequest request = GetListRequest.newBuilder()
                            .setSlot(wire(slot)).setKey(key).setPageSize(pageSize).setPageToken(token).build();
                    page = connection.call("AgentStateService/GetList", true,
                            () -> connection.agentStateService().getList(request));
                    items.addAll(page.getItemsList());
                    token = page.getNextPageToken();
                } while (!token.isEmpty());
            } catch (RemoteMemoryException e) {
                if (e.getCode() == Status.Code.ABORTED && restart + 1 < MAX_PAGE_RESTARTS) {
                    continue; // the list changed between pages: read it again from the start
                }
                throw e;
            }
            if (page.getFound() && page.getVersion() > 0) {
                lists.put(slot, new ListSeen(page.getVersion(), items.size(), digest(items)));
            } else {
                lists.remove(slot); // absent, or a 1.x memory read through: the first save is whole
            }
            List<T> out = new ArrayList<>(items.size());
            for (String json : items) {
                out.add(JsonUtils.getJsonCodec().fromJson(json, itemType));
            }
            return out;
        }
    }

    @Override
    public boolean exists(String userId, String sessionId) {
        SessionExistsRequest request = SessionExistsRequest.newBuilder().setSlot(wire(slot(userId, sessionId, ""))).build();
        return connection.call("AgentStateService/SessionExists", true,
                () -> connection.agentStateService().sessionExists(request)).getExists();
    }

    @Override
    public void delete(String userId, String sessionId) {
        Slot any = slot(userId, sessionId, "");
        DeleteSessionRequest request = DeleteSessionRequest.newBuilder().setSlot(wire(any)).build();
        connection.call("AgentStateService/DeleteSession", true,
                () -> connection.agentStateService().deleteSession(request));
        synchronized (slots) {
            slots.keySet().removeIf(s -> s.userId().equals(any.userId()) && s.sessionId().equals(any.sessionId()));
        }
        synchronized (lists) {
            lists.keySet().removeIf(s -> s.userId().equals(any.userId()) && s.sessionId().equals(any.sessionId()));
        }
    }

    /** Deletes the key's single value, as AgentScope's own stores do (a list under it stays). */
    @Override
    public void delete(String userId, String sessionId, String key) {
        Slot slot = slot(userId, sessionId, key);
        DeleteKeyRequest request = DeleteKeyRequest.newBuilder().setSlot(wire(slot)).setKey(key).build();
        connection.call("AgentStateService/DeleteKey", true, () -> connection.agentStateService().deleteKey(request));
        slots.put(slot, new Seen(slot, 0, null));
    }

    /** The user's session ids, as given when saved (never an encoding), in code point order. */
    @Override
    public Set<String> listSessionIds(String userId) {
        Set<String> ids = new LinkedHashSet<>();
        String token = "";
        do {
            ListSessionIdsRequest request = ListSessionIdsRequest.newBuilder()
                    .setUserId(user(userId, "user_id")).setPageSize(pageSize).setPageToken(token).build();
            ListSessionIdsResponse page = connection.call("AgentStateService/ListSessionIds", true,
                    () -> connection.agentStateService().listSessionIds(request));
            ids.addAll(page.getSessionIdsList());
            token = page.getNextPageToken();
        } while (!token.isEmpty());
        return ids;
    }

    /** Closes the connection if this store created it. */
    @Override
    public void close() {
        if (ownsConnection) {
            connection.close();
        }
    }

    // ---------------------------------------------------------------- versioning (post-2.0.0 API)

    /** True: the server versions every value atomically. */
    public boolean supportsVersioning() {
        return true;
    }

    /** A value with its version; an absent key has version 0. */
    public <T extends State> VersionedState<T> getVersioned(String userId, String sessionId, String key, Class<T> type) {
        Slot slot = slot(userId, sessionId, key);
        forgetDroppedReads();
        GetValueResponse response;
        try {
            response = getValue(slot);
        } catch (RuntimeException e) {
            // A failed read must not leave an older read standing in for it.
            slots.remove(slot);
            throw e;
        }
        if (!response.getFound()) {
            slots.put(slot, new Seen(slot, 0, null));
            if (conflictPolicy != ConflictPolicy.OVERWRITE) {
                absentReads.merge(slot, 1, Integer::sum);
            }
            return new VersionedState<>(null, 0);
        }
        T value = JsonUtils.getJsonCodec().fromJson(response.getJson(), type);
        Seen seen = new Seen(slot, response.getVersion(), response.getJson());
        slots.put(slot, seen);
        if (value != null) {
            reads.put(new ReadKey(value, droppedReads), seen);
        }
        return new VersionedState<>(value, response.getVersion());
    }

    /**
     * Stores a value if the stored version is {@code expectedVersion} (0: only if absent; {@link
     * #UNVERSIONED}: unconditionally).
     *
     * @return the new version, or {@link #UNVERSIONED} when another version is stored. Versions
     *     only rise: a key deleted and saved again goes on from its deleted version, so an {@code
     *     expectedVersion} read before a delete never matches the state saved after it
     */
    public long saveIfVersion(String userId, String sessionId, String key, State value, long expectedVersion) {
        Objects.requireNonNull(value, "value");
        if (expectedVersion < UNVERSIONED) {
            throw new IllegalArgumentException("expectedVersion: must be -1 (unconditional), 0 (create) or a version");
        }
        Slot slot = slot(userId, sessionId, key);
        String json = checkUnicode(JsonUtils.getJsonCodec().toJson(value), key);
        try {
            long version = putValue(slot, json, expectedVersion == UNVERSIONED ? null : expectedVersion);
            saved(value, slot, version, json);
            return version;
        } catch (Conflict conflict) {
            GetValueResponse current = conflict.retried ? getValue(slot) : null;
            if (current != null && current.getFound() && current.getJson().equals(json)) {
                saved(value, slot, current.getVersion(), json); // our write landed; its reply was lost
                return current.getVersion();
            }
            return UNVERSIONED;
        }
    }

    // ---------------------------------------------------------------- wire

    /** A compare-and-set the server refused. */
    private static final class Conflict extends RuntimeException {
        final long currentVersion;
        /** Whether the write was sent more than once (a reply was lost): it may be our own. */
        final boolean retried;

        Conflict(long currentVersion, boolean retried, RemoteMemoryException cause) {
            super(cause.getMessage(), cause, false, false);
            this.currentVersion = currentVersion;
            this.retried = retried;
        }
    }

    /**
     * Stores a value: whole ({@code PutValue}) when it fits one message, else in pieces ({@code
     * StreamPutValue}); also in pieces when the server's {@code max_state_value_bytes} is lower than
     * {@link #UNARY_VALUE_BYTES} and it refused the whole value.
     */
    private long putValue(Slot slot, String json, Long expected) {
        AtomicInteger attempts = new AtomicInteger();
        try {
            long size = utf8Length(json);
            if (size > unaryValueBytes) {
                return streamPutValue(slot, json, size, expected, attempts);
            }
            try {
                return unaryPutValue(slot, json, expected, attempts);
            } catch (RemoteMemoryException e) {
                if (e.getCode() != Status.Code.RESOURCE_EXHAUSTED || !String.valueOf(e.getServerMessage()).startsWith("json:")) {
                    throw e;
                }
                log.debug("{} of session {} is larger than the server takes in one message; sending it in pieces",
                        slot.key(), slot.sessionId());
                return streamPutValue(slot, json, size, expected, attempts);
            }
        } catch (RemoteMemoryException e) {
            if (e.getCode() == Status.Code.ABORTED) {
                // A replayed conditional write fails as a conflict, resolved by comparing contents.
                throw new Conflict(currentVersionOf(e), attempts.get() > 1, e);
            }
            throw e;
        }
    }

    private long unaryPutValue(Slot slot, String json, Long expected, AtomicInteger attempts) {
        PutValueRequest.Builder request = PutValueRequest.newBuilder().setSlot(wire(slot)).setKey(slot.key()).setJson(json);
        if (expected != null) {
            request.setCondition(WriteCondition.newBuilder().setExpectedVersion(expected));
        }
        PutValueRequest built = request.build();
        return connection.call("AgentStateService/PutValue", true, () -> {
            attempts.incrementAndGet();
            return connection.agentStateService().putValue(built);
        }).getVersion();
    }

    /** {@code StreamPutValue}: the first message names the value, then pieces as the transport is ready. */
    private long streamPutValue(Slot slot, String json, long size, Long expected, AtomicInteger attempts) {
        return connection.call("AgentStateService/StreamPutValue", true, () -> {
            attempts.incrementAndGet();
            CompletableFuture<StreamPutValueResponse> done = new CompletableFuture<>();
            Object ready = new Object();
            @SuppressWarnings("unchecked")
            ClientCallStreamObserver<StreamPutValueRequest>[] call = new ClientCallStreamObserver[1];
            connection.stub(AgentStateServiceGrpc::newStub).streamPutValue(
                    new ClientResponseObserver<StreamPutValueRequest, StreamPutValueResponse>() {
                        @Override
                        public void beforeStart(ClientCallStreamObserver<StreamPutValueRequest> requests) {
                            call[0] = requests;
                            requests.setOnReadyHandler(() -> {
                                synchronized (ready) {
                                    ready.notifyAll();
                                }
                            });
                        }

                        @Override
                        public void onNext(StreamPutValueResponse value) {
                            done.complete(value);
                        }

                        @Override
                        public void onError(Throwable t) {
                            done.completeExceptionally(t);
                            synchronized (ready) {
                                ready.notifyAll();
                            }
                        }

                        @Override
                        public void onCompleted() {
                            done.complete(null);
                        }
                    });
            ClientCallStreamObserver<StreamPutValueRequest> out = call[0];
            try {
                int from = 0;
                do {
                    int end = pieceEnd(json, from);
                    StreamPutValueRequest.Builder piece = StreamPutValueRequest.newBuilder().setJsonPiece(json.substring(from, end));
                    if (from == 0) {
                        piece.setSlot(wire(slot)).setKey(slot.key()).setTotalBytes(size);
                        if (expected != null) {
                            piece.setCondition(WriteCondition.newBuilder().setExpectedVersion(expected));
                        }
                    }
                    // Flow control: hold the next piece until the transport takes it (the server
                    // may also have answered early, e.g. refusing the announced size).
                    synchronized (ready) {
                        while (!out.isReady() && !done.isDone()) {
                            ready.wait(100);
                        }
                    }
                    if (done.isDone()) {
                        break;
                    }
                    out.onNext(piece.build());
                    from = end;
                } while (from < json.length());
                if (!done.isDone()) {
                    out.onCompleted();
                }
                StreamPutValueResponse response = done.get();
                if (response == null) {
                    throw Status.INTERNAL.withDescription("the server sent no response").asRuntimeException();
                }
                return response;
            } catch (InterruptedException e) {
                out.cancel("interrupted", e);
                Thread.currentThread().interrupt();
                throw Status.CANCELLED.withDescription("interrupted").withCause(e).asRuntimeException();
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                throw cause instanceof StatusRuntimeException sre ? sre : Status.fromThrowable(cause).asRuntimeException();
            } catch (RuntimeException e) {
                out.cancel("the stream failed on the client", e);
                throw e;
            }
        }).getVersion();
    }

    /** Where the piece from {@code from} ends: at most {@link #PIECE_CHARS} units, never inside a surrogate pair. */
    static int pieceEnd(String s, int from) {
        int end = Math.min(from + PIECE_CHARS, s.length());
        if (end < s.length() && end > from + 1 && Character.isHighSurrogate(s.charAt(end - 1))
                && Character.isLowSurrogate(s.charAt(end))) {
            end--;
        }
        return end;
    }

    /**
     * Reads a value: whole ({@code GetValue}) unless this process last saw it larger than one
     * message, and in pieces ({@code StreamGetValue}) when the server says it is too large for
     * {@code GetValue} (its only {@code FAILED_PRECONDITION}).
     */
    private GetValueResponse getValue(Slot slot) {
        Seen seen = slots.get(slot);
        if (unaryValueBytes == 0 || (seen != null && seen.json() != null && seen.json().length() > unaryValueBytes)) {
            return streamGetValue(slot);
        }
        GetValueRequest request = GetValueRequest.newBuilder().setSlot(wire(slot)).setKey(slot.key()).build();
        try {
            return connection.call("AgentStateService/GetValue", true, () -> connection.agentStateService().getValue(request));
        } catch (RemoteMemoryException e) {
            if (e.getCode() != Status.Code.FAILED_PRECONDITION) {
                throw e;
            }
            return streamGetValue(slot);
        }
    }

    private GetValueResponse streamGetValue(Slot slot) {
        StreamGetValueRequest request = StreamGetValueRequest.newBuilder().setSlot(wire(slot)).setKey(slot.key()).build();
        return connection.call("AgentStateService/StreamGetValue", true, () -> {
            Iterator<StreamGetValueResponse> stream = connection.stub(AgentStateServiceGrpc::newBlockingStub).streamGetValue(request);
            StreamGetValueResponse first = null;
            StringBuilder json = null;
            while (stream.hasNext()) {
                StreamGetValueResponse piece = stream.next();
                if (first == null) {
                    first = piece;
                    json = new StringBuilder((int) Math.min(piece.getTotalBytes(), Integer.MAX_VALUE - 16));
                }
                json.append(piece.getJsonPiece());
            }
            if (first == null || !first.getFound()) {
                return GetValueResponse.getDefaultInstance();
            }
            String text = json.toString();
            if (utf8Length(text) != first.getTotalBytes()) {
                throw Status.DATA_LOSS.withDescription("the value's pieces add up to " + utf8Length(text)
                        + " bytes, not " + first.getTotalBytes()).asRuntimeException();
            }
            return GetValueResponse.newBuilder().setFound(true).setJson(text).setVersion(first.getVersion()).build();
        });
    }

    /** UTF-8 bytes of {@code s} as protobuf encodes it (an unpaired surrogate becomes {@code ?}). */
    static long utf8Length(String s) {
        long bytes = 0;
        int n = s.length();
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                bytes += 1;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                bytes += 4;
                i++;
            } else if (Character.isSurrogate(c)) {
                bytes += 1;
            } else {
                bytes += 3;
            }
        }
        return bytes;
    }

    private static long currentVersionOf(RemoteMemoryException e) {
        if (e.getCause() instanceof StatusRuntimeException sre && sre.getTrailers() != null) {
            String v = sre.getTrailers().get(CURRENT_VERSION);
            if (v != null) {
                return Long.parseLong(v);
            }
        }
        Matcher m = CURRENT_VERSION_TEXT.matcher(String.valueOf(e.getServerMessage()));
        return m.find() ? Long.parseLong(m.group(1)) : UNVERSIONED;
    }

    private ConcurrentStateModificationException conflict(Slot slot, long currentVersion, String reason) {
        return new ConcurrentStateModificationException(
                slot.userId().isEmpty() ? null : slot.userId(), slot.sessionId(), slot.key(), currentVersion, reason);
    }

    /** Consumes one pending absent read of the slot; false when there is none. */
    private boolean takeAbsentRead(Slot slot) {
        boolean[] taken = {false};
        absentReads.computeIfPresent(slot, (s, n) -> {
            taken[0] = true;
            return n > 1 ? n - 1 : null;
        });
        return taken[0];
    }

    /**
     * Returns {@code json} unless it holds half a surrogate pair (a model's stream cut inside an
     * emoji, say), which UTF-8 cannot encode: protobuf would silently send {@code '?'} in its
     * place and the stored state would differ from the one saved. Jackson writes such a character
     * as it is, so the text shows it.
     */
    private static String checkUnicode(String json, String where) {
        int at = Utf16.loneSurrogateAt(json);
        if (at >= 0) {
            throw new IllegalArgumentException(where + ": the state contains a lone surrogate (half of a"
                    + " UTF-16 pair) at character " + json.codePointCount(0, at)
                    + " of its JSON; it is not Unicode text and cannot be stored");
        }
        return json;
    }

    /** Removes what was remembered of states read whose callers dropped them. */
    private void forgetDroppedReads() {
        for (Reference<?> dropped = droppedReads.poll(); dropped != null; dropped = droppedReads.poll()) {
            reads.remove(dropped);
        }
    }

    /** How many objects returned by get() this store remembers the version of (for tests). */
    int rememberedReadCount() {
        return reads.size();
    }

    /** How many slots this store remembers an absent read or a list of (for tests). */
    int rememberedAbsentReadAndListCount() {
        return absentReads.size() + lists.size();
    }

    /** How many slots this store remembers a state of (for tests). */
    int rememberedSlotCount() {
        return slots.size();
    }

    private void remember(Slot slot, long version, String json) {
        slots.put(slot, new Seen(slot, version, json));
    }

    private static String user(String userId, String field) {
        return userId == null || userId.isBlank() ? "" : Utf16.checkText(userId, field);
    }

    private static Slot slot(String userId, String sessionId, String key) {
        // As AgentScope's own stores fail: NullPointerException for null, else IllegalArgumentException.
        Objects.requireNonNull(sessionId, "sessionId must not be null");
        if (sessionId.isBlank()) {
            throw new IllegalArgumentException("sessionId must not be blank");
        }
        // protobuf would send '?' for half a surrogate pair: the slot of another session.
        return new Slot(user(userId, "slot.user_id"), Utf16.checkText(sessionId, "slot.session_id"),
                key == null ? null : Utf16.checkText(key, "key"));
    }

    private static StateSlot wire(Slot slot) {
        return StateSlot.newBuilder().setUserId(slot.userId()).setSessionId(slot.sessionId()).build();
    }

    private static byte[] digest(List<String> items) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            for (String item : items) {
                sha.update(item.getBytes(StandardCharsets.UTF_8));
                sha.update((byte) '\n');
            }
            return sha.digest();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    // ---------------------------------------------------------------- builder

    /** Options of a {@link RemoteAgentStateStore}; a channel, a target or a connection is required. */
    public static final class Builder extends ConnectionOptions<Builder> {
        private ConflictPolicy conflictPolicy = ConflictPolicy.MERGE_APPENDED;
        private int maxMergeAttempts = 5;
        private int pageSize;
        private int unaryValueBytes = UNARY_VALUE_BYTES;
        private int rememberedSlots = REMEMBERED_SLOTS;

        private Builder() {}

        /** Values up to this many UTF-8 bytes are sent whole; for tests and measurements (0: always in pieces). */
        Builder unaryValueBytes(int bytes) {
            this.unaryValueBytes = Math.max(0, Math.min(bytes, UNARY_VALUE_BYTES));
            return this;
        }

        /** How {@code save} resolves a concurrent modification (default MERGE_APPENDED). */
        public Builder conflictPolicy(ConflictPolicy policy) {
            this.conflictPolicy = Objects.requireNonNull(policy, "conflictPolicy");
            return this;
        }

        /** Merge attempts before a MERGE_APPENDED save gives up (default 5). */
        public Builder maxMergeAttempts(int attempts) {
            if (attempts < 1) {
                throw new IllegalArgumentException("maxMergeAttempts: must be at least 1");
            }
            this.maxMergeAttempts = attempts;
            return this;
        }

        /** Items per GetList page and ids per ListSessionIds page; 0 (default): the server's. */
        public Builder pageSize(int pageSize) {
            if (pageSize < 0) {
                throw new IllegalArgumentException("pageSize: must not be negative");
            }
            this.pageSize = pageSize;
            return this;
        }

        /** How many slots' last states are kept for merges (default {@link #REMEMBERED_SLOTS}); for tests. */
        Builder rememberedSlots(int slots) {
            if (slots < 1) {
                throw new IllegalArgumentException("rememberedSlots: must be at least 1");
            }
            this.rememberedSlots = slots;
            return this;
        }

        public RemoteAgentStateStore build() {
            return new RemoteAgentStateStore(this);
        }
    }
}
