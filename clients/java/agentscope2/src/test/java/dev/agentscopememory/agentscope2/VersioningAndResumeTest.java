package dev.agentscopememory.agentscope2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.AddMessagesRequest;
import dev.agentscopememory.grpc.v1.ContentBlock;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.MemoryKind;
import dev.agentscopememory.grpc.v1.Role;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.permission.PermissionMode;
import io.agentscope.core.state.AgentState;
import io.agentscope.core.state.AgentStateStore;
import io.agentscope.core.state.JsonFileAgentStateStore;
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
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Versioning, conflict policies, the upstream #2741 guard, and 1.x sessions resuming under 2.x. */
class VersioningAndResumeTest {

    private static TestServer server;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
    }

    static RemoteAgentStateStore store(ConflictPolicy policy) {
        return RemoteAgentStateStore.builder().target(server.target()).conflictPolicy(policy).build();
    }

    static String session() {
        return "会话-" + UUID.randomUUID();
    }

    static Msg msg(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    static List<String> texts(AgentState state) {
        return state.getContext().stream().map(Msg::getTextContent).toList();
    }

    @Test
    void versionedGetAndSaveIfVersion() {
        String s = session();
        try (RemoteAgentStateStore store = store(ConflictPolicy.FAIL)) {
            assertTrue(store.supportsVersioning());
            VersionedState<AgentState> absent = store.getVersioned("u", s, "agent_state", AgentState.class);
            assertFalse(absent.isPresent());
            assertEquals(0, absent.version());
            AgentState state = AgentState.builder().build();
            assertEquals(1, store.saveIfVersion("u", s, "agent_state", state, 0));
            assertEquals(RemoteAgentStateStore.UNVERSIONED, store.saveIfVersion("u", s, "agent_state", state, 0));
            state.contextMutable().add(msg("一"));
            assertEquals(2, store.saveIfVersion("u", s, "agent_state", state, 1));
            assertEquals(RemoteAgentStateStore.UNVERSIONED, store.saveIfVersion("u", s, "agent_state", state, 1));
            assertEquals(3, store.saveIfVersion("u", s, "agent_state", state, RemoteAgentStateStore.UNVERSIONED));
            VersionedState<AgentState> read = store.getVersioned("u", s, "agent_state", AgentState.class);
            assertEquals(3, read.version());
            assertEquals(List.of("一"), texts(read.value()));
        }
    }

    /**
     * ABA: the server's versions restarted at 1 after a delete, so a replica holding version 1 of a
     * deleted session saved over a brand-new session another replica had started under the same
     * ids.
     */
    @Test
    void aStateReadBeforeItsSessionWasDeletedIsNotSavedOverTheNewSession() {
        String s = session();
        try (RemoteAgentStateStore stale = store(ConflictPolicy.FAIL);
                RemoteAgentStateStore other = store(ConflictPolicy.FAIL)) {
            AgentState old = AgentState.builder().build();
            old.contextMutable().add(msg("旧会话"));
            other.save("用户", s, "agent_state", old);
            VersionedState<AgentState> read = stale.getVersioned("用户", s, "agent_state", AgentState.class);
            AgentState held = stale.get("用户", s, "agent_state", AgentState.class).orElseThrow();
            other.delete("用户", s);
            assertFalse(other.exists("用户", s));
            assertEquals(0, other.getVersioned("用户", s, "agent_state", AgentState.class).version());
            AgentState fresh = AgentState.builder().build();
            fresh.contextMutable().add(msg("新会话"));
            other.save("用户", s, "agent_state", fresh);

            held.contextMutable().add(msg("过期的一轮"));
            assertThrows(ConcurrentStateModificationException.class, () -> stale.save("用户", s, "agent_state", held));
            assertEquals(RemoteAgentStateStore.UNVERSIONED,
                    stale.saveIfVersion("用户", s, "agent_state", read.value(), read.version()));
            VersionedState<AgentState> now = other.getVersioned("用户", s, "agent_state", AgentState.class);
            assertEquals(List.of("新会话"), texts(now.value()));
            assertTrue(now.version() > read.version(), "versions go on after a delete: " + now.version());
        }
    }

    /**
     * A state read with getVersioned and stored with saveIfVersion, then saved again: the save
     * compared against the version read, not the one saveIfVersion wrote, so it conflicted with
     * its own write (FAIL) or merged the saveIfVersion's message in a second time (MERGE_APPENDED).
     */
    @Test
    void aSaveAfterSaveIfVersionIsNotAConflictWithIt() {
        for (ConflictPolicy policy : List.of(ConflictPolicy.FAIL, ConflictPolicy.MERGE_APPENDED)) {
            String s = session();
            try (RemoteAgentStateStore store = store(policy)) {
                AgentState first = AgentState.builder().build();
                first.contextMutable().add(msg("零"));
                store.save("u", s, "agent_state", first);
                VersionedState<AgentState> read = store.getVersioned("u", s, "agent_state", AgentState.class);
                read.value().contextMutable().add(msg("一"));
                assertEquals(2, store.saveIfVersion("u", s, "agent_state", read.value(), read.version()));
                read.value().contextMutable().add(msg("二"));
                store.save("u", s, "agent_state", read.value());
                VersionedState<AgentState> stored = store.getVersioned("u", s, "agent_state", AgentState.class);
                assertEquals(List.of("零", "一", "二"), texts(stored.value()), policy.name());
                assertEquals(3, stored.version(), policy.name());
            }
        }
    }

    @Test
    void aStateHoldingHalfASurrogatePairIsRefusedNotStoredWithAQuestionMark() {
        // A model's stream cut inside an emoji leaves half a surrogate pair in the context; UTF-8
        // (and so protobuf) cannot carry it, and protobuf-java silently wrote '?' in its place.
        String s = session();
        try (RemoteAgentStateStore store = store(ConflictPolicy.OVERWRITE)) {
            AgentState state = AgentState.builder().build();
            state.contextMutable().add(msg("完整 \uD83D\uDE00"));
            store.save("u", s, "agent_state", state);
            state.contextMutable().add(msg("half \uD83D"));
            IllegalArgumentException value = assertThrows(IllegalArgumentException.class,
                    () -> store.save("u", s, "agent_state", state));
            assertTrue(value.getMessage().startsWith("agent_state: the state contains a lone surrogate"), value.getMessage());
            assertThrows(IllegalArgumentException.class, () -> store.saveIfVersion("u", s, "agent_state", state, 1));
            IllegalArgumentException list = assertThrows(IllegalArgumentException.class,
                    () -> store.save("u", s, "memory_messages", List.of(msg("ok"), msg("x\uDE00"))));
            assertTrue(list.getMessage().startsWith("memory_messages[1]: the state contains a lone surrogate"), list.getMessage());
            assertEquals(List.of("完整 \uD83D\uDE00"),
                    texts(store.get("u", s, "agent_state", AgentState.class).orElseThrow()));
            assertTrue(store.getList("u", s, "memory_messages", Msg.class).isEmpty());
        }
    }

    /**
     * Half a surrogate pair in a session id (or user id, or key) went as '?': the save landed in
     * the session "会话?" of someone else. Refused naming the field, as the server words it.
     */
    @Test
    void anIdHoldingHalfASurrogatePairIsRefusedNotSentAsAnotherId() {
        String s = session();
        try (RemoteAgentStateStore store = store(ConflictPolicy.OVERWRITE)) {
            AgentState other = AgentState.builder().build();
            other.contextMutable().add(msg("别人的会话"));
            store.save("u", s + "?", "agent_state", other);
            AgentState mine = AgentState.builder().build();
            mine.contextMutable().add(msg("我的"));
            IllegalArgumentException session = assertThrows(IllegalArgumentException.class,
                    () -> store.save("u", s + "\uD800", "agent_state", mine));
            assertEquals("slot.session_id: contains a lone surrogate at character " + s.codePointCount(0, s.length())
                    + "; it is not Unicode text", session.getMessage());
            assertTrue(assertThrows(IllegalArgumentException.class,
                    () -> store.get("u\uDC00", s + "?", "agent_state", AgentState.class)).getMessage()
                    .startsWith("slot.user_id: "));
            assertTrue(assertThrows(IllegalArgumentException.class,
                    () -> store.save("u", s + "?", "agent\uD83D", mine)).getMessage().startsWith("key: "));
            assertTrue(assertThrows(IllegalArgumentException.class,
                    () -> store.delete("u", s + "\uD800")).getMessage().startsWith("slot.session_id: "));
            assertTrue(assertThrows(IllegalArgumentException.class,
                    () -> store.listSessionIds("u\uD800")).getMessage().startsWith("user_id: "));
            assertEquals(List.of("别人的会话"),
                    texts(store.get("u", s + "?", "agent_state", AgentState.class).orElseThrow()));
        }
    }

    @Test
    void aStoreServingManySessionsKeepsOnlyTheRecentOnesStatesInMemory() {
        // The store remembers each slot's last state (the base of a MERGE_APPENDED merge): kept
        // for every slot it ever touched, a process serving many sessions grew without bound.
        int remembered = 8;
        try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().target(server.target())
                .rememberedSlots(remembered).build();
                RemoteAgentStateStore other = store(ConflictPolicy.OVERWRITE)) {
            for (int i = 0; i < 3 * remembered; i++) {
                AgentState state = AgentState.builder().build();
                state.contextMutable().add(msg("会话 " + i));
                store.save("u", session(), "agent_state", state);
            }
            assertTrue(store.rememberedSlotCount() <= remembered, store.rememberedSlotCount() + " slots remembered");

            // A recent slot still merges as before: read, another writer appends, this one
            // saves a fresh state with its own message appended (as a 2.0 ReActAgent does).
            String s = session();
            AgentState first = AgentState.builder().build();
            first.contextMutable().add(msg("base"));
            store.save("u", s, "agent_state", first);
            AgentState read = store.get("u", s, "agent_state", AgentState.class).orElseThrow();
            AgentState theirs = other.get("u", s, "agent_state", AgentState.class).orElseThrow();
            theirs.contextMutable().add(msg("from other"));
            other.save("u", s, "agent_state", theirs);
            AgentState mine = AgentState.builder().build();
            mine.contextMutable().addAll(read.getContext());
            mine.contextMutable().add(msg("from store"));
            store.save("u", s, "agent_state", mine);
            assertEquals(List.of("base", "from other", "from store"),
                    texts(other.get("u", s, "agent_state", AgentState.class).orElseThrow()));
        }
    }

    /**
     * A 2.0.0 ReActAgent reads {@code toolkit_activeGroups} of every new session and never saves
     * it, and {@code Memory.saveTo} saves a list per session: the store kept an entry for each
     * such absent read and each list for its whole life, one more per session served.
     */
    @Test
    void absentReadsAndListsOfManySessionsAreNotKeptForever() {
        int remembered = 8;
        try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().target(server.target())
                .rememberedSlots(remembered).build()) {
            ReActAgent agent = Scripts.agent(new ScriptedModel(Scripts.answers("A", 3 * remembered)), store);
            for (int i = 0; i < 3 * remembered; i++) {
                String s = session();
                Scripts.call(agent, "u", s, "第 " + i + " 个会话");
                store.save("u", s, "memory_messages", List.of(msg("一"), msg("二")));
            }
            assertTrue(store.rememberedAbsentReadAndListCount() <= 2 * remembered,
                    store.rememberedAbsentReadAndListCount() + " absent reads and lists remembered");
            // A recent list still appends (its last state is remembered) and reads back whole.
            String s = session();
            store.save("u", s, "memory_messages", List.of(msg("一")));
            store.save("u", s, "memory_messages", List.of(msg("一"), msg("二")));
            assertEquals(List.of("一", "二"), store.getList("u", s, "memory_messages", Msg.class).stream()
                    .map(Msg::getTextContent).toList());
        }
    }

    @Test
    void statesACallerReadAndDroppedAreNotKeptAlive() throws Exception {
        // A 2.0 ReActAgent reads its state at the start of every call and saves a new object at
        // the end, so the object get() returned was never saved: remembered for its version, each
        // call's state stayed in memory, up to 4,096 of them for one conversation.
        String s = session();
        int calls = 40;
        try (RemoteAgentStateStore store = store(ConflictPolicy.MERGE_APPENDED)) {
            List<Msg> context = new java.util.ArrayList<>();
            for (int i = 0; i < calls; i++) {
                store.get("u", s, "agent_state", AgentState.class);
                context.add(msg("turn " + i + " " + "x".repeat(10_000)));
                AgentState next = AgentState.builder().build();
                next.contextMutable().addAll(context);
                store.save("u", s, "agent_state", next);
            }
            // Nothing references the states read any more: the collector may take them.
            long until = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
            while (store.rememberedReadCount() > 1 && System.nanoTime() < until) {
                System.gc();
                Thread.sleep(50);
                store.get("other", session(), "agent_state", AgentState.class); // any call purges
            }
            assertTrue(store.rememberedReadCount() <= 1, store.rememberedReadCount() + " states read still held");
            assertEquals(calls, texts(store.get("u", s, "agent_state", AgentState.class).orElseThrow()).size());
        }
    }

    /** Two processes read version 1, both append a message; the second save is the conflict. */
    static void race(RemoteAgentStateStore first, RemoteAgentStateStore second, String s) {
        try (RemoteAgentStateStore seed = store(ConflictPolicy.OVERWRITE)) {
            AgentState state = AgentState.builder().build();
            state.contextMutable().add(msg("base"));
            seed.save(null, s, "agent_state", state);
        }
        AgentState a = first.get(null, s, "agent_state", AgentState.class).orElseThrow();
        AgentState b = second.get(null, s, "agent_state", AgentState.class).orElseThrow();
        b.contextMutable().add(msg("from b"));
        second.save(null, s, "agent_state", b);
        a.contextMutable().add(msg("from a"));
        first.save(null, s, "agent_state", a);
    }

    @Test
    void failRefusesAConcurrentSaveAndMergeAppendsBoth() {
        String s = session();
        try (RemoteAgentStateStore a = store(ConflictPolicy.FAIL); RemoteAgentStateStore b = store(ConflictPolicy.FAIL)) {
            ConcurrentStateModificationException e = assertThrows(ConcurrentStateModificationException.class, () -> race(a, b, s));
            assertEquals(2, e.getCurrentVersion());
            assertEquals(List.of("base", "from b"), texts(a.get(null, s, "agent_state", AgentState.class).orElseThrow()));
        }
        String t = session();
        try (RemoteAgentStateStore a = store(ConflictPolicy.MERGE_APPENDED); RemoteAgentStateStore b = store(ConflictPolicy.MERGE_APPENDED)) {
            race(a, b, t);
            assertEquals(List.of("base", "from b", "from a"), texts(a.get(null, t, "agent_state", AgentState.class).orElseThrow()));
        }
        String u = session();
        try (RemoteAgentStateStore a = store(ConflictPolicy.OVERWRITE); RemoteAgentStateStore b = store(ConflictPolicy.OVERWRITE)) {
            race(a, b, u);
            // Last writer wins: b's turn is lost, as with AgentScope's own stores.
            assertEquals(List.of("base", "from a"), texts(a.get(null, u, "agent_state", AgentState.class).orElseThrow()));
        }
    }

    /**
     * A state whose save was merged with another writer's, saved again (a 2.0.0 ReActAgent's
     * setPermissionMode saves its call's state): the save compared against the merged version
     * and stored this object, dropping the other writer's turn that the merge had kept.
     */
    @Test
    void aStateSavedAgainAfterAMergeKeepsWhatWasMergedIn() {
        String s = session();
        try (RemoteAgentStateStore a = store(ConflictPolicy.MERGE_APPENDED);
                RemoteAgentStateStore b = store(ConflictPolicy.MERGE_APPENDED)) {
            AgentState seed = AgentState.builder().build();
            seed.contextMutable().add(msg("base"));
            a.save(null, s, "agent_state", seed);
            AgentState mine = a.get(null, s, "agent_state", AgentState.class).orElseThrow();
            AgentState theirs = b.get(null, s, "agent_state", AgentState.class).orElseThrow();
            theirs.contextMutable().add(msg("from b"));
            b.save(null, s, "agent_state", theirs);
            mine.contextMutable().add(msg("from a"));
            a.save(null, s, "agent_state", mine);
            assertEquals(List.of("base", "from b", "from a"), texts(b.get(null, s, "agent_state", AgentState.class).orElseThrow()));
            mine.contextMutable().add(msg("a again"));
            a.save(null, s, "agent_state", mine);
            assertEquals(List.of("base", "from b", "from a", "a again"),
                    texts(b.get(null, s, "agent_state", AgentState.class).orElseThrow()));
            a.save(null, s, "agent_state", mine); // nothing new: nothing added
            assertEquals(List.of("base", "from b", "from a", "a again"),
                    texts(b.get(null, s, "agent_state", AgentState.class).orElseThrow()));
        }
    }

    /**
     * A merged save carried only the context: the permission mode this save set was dropped for
     * the stored one. Now the fields each writer changed are kept, the other writer's beside this
     * one's, and where both changed one this save's wins (as the last save in AgentScope's stores).
     */
    @Test
    void aMergedSaveKeepsTheSettingsItChangedBesideTheOtherWritersOnes() {
        String s = session();
        try (RemoteAgentStateStore a = store(ConflictPolicy.MERGE_APPENDED);
                RemoteAgentStateStore b = store(ConflictPolicy.MERGE_APPENDED);
                RemoteAgentStateStore reader = store(ConflictPolicy.OVERWRITE)) {
            AgentState seed = AgentState.builder().build();
            seed.contextMutable().add(msg("开始"));
            a.save("用户", s, "agent_state", seed);
            AgentState mine = a.get("用户", s, "agent_state", AgentState.class).orElseThrow();
            AgentState theirs = b.get("用户", s, "agent_state", AgentState.class).orElseThrow();
            theirs.contextMutable().add(msg("来自 b"));
            theirs.getToolContext().setActivatedGroups(List.of("天气工具"));
            b.save("用户", s, "agent_state", theirs);
            mine.contextMutable().add(msg("来自 a"));
            mine.setPermissionContext(mine.getPermissionContext().withMode(PermissionMode.BYPASS));
            a.save("用户", s, "agent_state", mine);
            AgentState stored = reader.get("用户", s, "agent_state", AgentState.class).orElseThrow();
            assertEquals(List.of("开始", "来自 b", "来自 a"), texts(stored));
            assertEquals(PermissionMode.BYPASS, stored.getPermissionContext().getMode());
            assertEquals(List.of("天气工具"), stored.getToolContext().getActivatedGroups());

            // Both change the mode: the later save's stands; b's tool groups stay.
            theirs = b.get("用户", s, "agent_state", AgentState.class).orElseThrow();
            theirs.setPermissionContext(theirs.getPermissionContext().withMode(PermissionMode.EXPLORE));
            b.save("用户", s, "agent_state", theirs);
            mine.setPermissionContext(mine.getPermissionContext().withMode(PermissionMode.DONT_ASK));
            a.save("用户", s, "agent_state", mine);
            stored = reader.get("用户", s, "agent_state", AgentState.class).orElseThrow();
            assertEquals(PermissionMode.DONT_ASK, stored.getPermissionContext().getMode());
            assertEquals(List.of("天气工具"), stored.getToolContext().getActivatedGroups());
            assertEquals(List.of("开始", "来自 b", "来自 a"), texts(stored));
        }
    }

    /**
     * A 2.0.0 ReActAgent's {@code setPermissionMode} saves the state its last call saved; after
     * another replica's turn that save is merged, and the mode it set was lost (the session stayed
     * in DEFAULT for every later call).
     */
    @Test
    void aPermissionModeSetAfterAnotherReplicasTurnIsKept() {
        String s = session();
        try (RemoteAgentStateStore a = store(ConflictPolicy.MERGE_APPENDED);
                RemoteAgentStateStore b = store(ConflictPolicy.MERGE_APPENDED);
                RemoteAgentStateStore reader = store(ConflictPolicy.OVERWRITE)) {
            ReActAgent first = Scripts.agent(new ScriptedModel(Scripts.answers("A", 1), "A"), a);
            ReActAgent second = Scripts.agent(new ScriptedModel(Scripts.answers("B", 2), "B"), b);
            Scripts.call(first, "用户", s, "A asks 0");
            Scripts.call(second, "用户", s, "B asks 0");
            first.setPermissionMode("用户", s, PermissionMode.BYPASS);
            AgentState stored = reader.get("用户", s, "agent_state", AgentState.class).orElseThrow();
            assertEquals(PermissionMode.BYPASS, stored.getPermissionContext().getMode());
            assertEquals(List.of("A asks 0", "A answer 0", "B asks 0", "B answer 0"), texts(stored));
            Scripts.call(second, "用户", s, "B asks 1");
            assertEquals(PermissionMode.BYPASS, second.getPermissionMode("用户", s));
            assertEquals(6, texts(reader.get("用户", s, "agent_state", AgentState.class).orElseThrow()).size());
        }
    }

    @Test
    void aFailedLoadCannotWipeTheStoredState() throws Exception {
        String s = session();
        try (RemoteAgentStateStore seed = store(ConflictPolicy.OVERWRITE)) {
            AgentState state = AgentState.builder().build();
            state.contextMutable().add(msg("precious"));
            seed.save("u", s, "agent_state", state);
        }
        // A store whose read failed (here: the server was unreachable) saves a fresh state, as a
        // 2.0.0 ReActAgent does after logging the failed load (upstream #2741).
        try (RemoteAgentStateStore broken = RemoteAgentStateStore.builder().target("127.0.0.1:1")
                .deadline(Duration.ofSeconds(2)).maxAttempts(1).build()) {
            assertThrows(RemoteMemoryException.class, () -> broken.get("u", s, "agent_state", AgentState.class));
        }
        try (RemoteAgentStateStore store = store(ConflictPolicy.MERGE_APPENDED)) {
            assertThrows(ConcurrentStateModificationException.class,
                    () -> store.save("u", s, "agent_state", AgentState.builder().build()));
            assertEquals(List.of("precious"), texts(store.get("u", s, "agent_state", AgentState.class).orElseThrow()));
        }
    }

    /** {@code channel} with the answer of the next PutValue lost (stored on the server) while {@code lose} is set. */
    static Channel losingNextPutValueAnswer(Channel channel, AtomicBoolean lose) {
        return ClientInterceptors.intercept(channel, new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                ClientCall<Q, R> call = next.newCall(method, options);
                if (!method.getFullMethodName().endsWith("/PutValue") || !lose.getAndSet(false)) {
                    return call;
                }
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
        });
    }

    /**
     * A save of a slot this process has not read is a create. When the create landed but its
     * answer was lost, the replay found the slot taken and the save failed as a conflict with a
     * state "this process has not read", though the state stored was its own.
     */
    @Test
    void aCreateWhoseAnswerWasLostIsNotAConflictWithItself() {
        ManagedChannel channel = Grpc.newChannelBuilder(server.target(), InsecureChannelCredentials.create()).build();
        AtomicBoolean lose = new AtomicBoolean();
        try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().channel(losingNextPutValueAnswer(channel, lose))
                .conflictPolicy(ConflictPolicy.FAIL).build()) {
            String s = session();
            AgentState state = AgentState.builder().build();
            state.contextMutable().add(msg("第一句"));
            lose.set(true);
            store.save("u", s, "agent_state", state);
            assertFalse(lose.get(), "the answer was lost");
            state.contextMutable().add(msg("第二句"));
            store.save("u", s, "agent_state", state);
            VersionedState<AgentState> stored = store.getVersioned("u", s, "agent_state", AgentState.class);
            assertEquals(List.of("第一句", "第二句"), texts(stored.value()));
            assertEquals(2, stored.version());

            // Another state on a slot not read, whose create did not land: still refused.
            String t = session();
            AgentState theirs = AgentState.builder().build();
            theirs.contextMutable().add(msg("别人的"));
            try (RemoteAgentStateStore other = store(ConflictPolicy.OVERWRITE)) {
                other.save("u", t, "agent_state", theirs);
            }
            lose.set(true);
            assertThrows(ConcurrentStateModificationException.class, () -> store.save("u", t, "agent_state", state));
            assertEquals(List.of("别人的"), texts(store.get("u", t, "agent_state", AgentState.class).orElseThrow()));
        } finally {
            channel.shutdownNow();
        }
    }

    /** What each operation throws for a null and a blank session id: class and message. */
    static List<String> sessionIdFailures(AgentStateStore store) {
        List<String> out = new ArrayList<>();
        for (String sessionId : new String[] {null, " \t"}) {
            List<Runnable> calls = List.of(
                    () -> store.save("u", sessionId, "agent_state", AgentState.builder().build()),
                    () -> store.save("u", sessionId, "memory_messages", List.of(msg("x"))),
                    () -> store.get("u", sessionId, "agent_state", AgentState.class),
                    () -> store.getList("u", sessionId, "memory_messages", Msg.class),
                    () -> store.exists("u", sessionId),
                    () -> store.delete("u", sessionId),
                    () -> store.delete("u", sessionId, "agent_state"));
            for (Runnable call : calls) {
                try {
                    call.run();
                    out.add("no exception");
                } catch (RuntimeException e) {
                    out.add(e.getClass().getName() + ": " + e.getMessage());
                }
            }
        }
        return out;
    }

    /** A null session id was an IllegalArgumentException; AgentScope's stores throw NullPointerException. */
    @Test
    void aMissingSessionIdFailsAsInAgentScopesOwnStore() throws Exception {
        java.nio.file.Path root = Files.createTempDirectory("json-store");
        List<String> want = sessionIdFailures(new JsonFileAgentStateStore(root));
        assertEquals("java.lang.NullPointerException: sessionId must not be null", want.get(0));
        try (RemoteAgentStateStore store = store(ConflictPolicy.MERGE_APPENDED)) {
            assertEquals(want, sessionIdFailures(store));
        }
    }

    @Test
    void listsAppendWhileTheyOnlyGrow() {
        String s = session();
        try (RemoteAgentStateStore store = store(ConflictPolicy.MERGE_APPENDED);
                RemoteAgentStateStore other = store(ConflictPolicy.MERGE_APPENDED)) {
            store.save("u", s, "memory_messages", List.of(msg("1"), msg("2")));
            store.save("u", s, "memory_messages", List.of(msg("1"), msg("2"), msg("3")));
            assertEquals(List.of("1", "2", "3"), other.getList("u", s, "memory_messages", Msg.class).stream().map(Msg::getTextContent).toList());
            // Another writer replaced it: the next save is whole again, and last-writer-wins.
            other.save("u", s, "memory_messages", List.of(msg("x")));
            store.save("u", s, "memory_messages", List.of(msg("1"), msg("2"), msg("3"), msg("4")));
            assertEquals(4, other.getList("u", s, "memory_messages", Msg.class).size());
            store.delete("u", s);
            assertFalse(other.exists("u", s));
        }
    }

    /**
     * A conversation a 1.x agent kept through our 1.x RemoteMemory (an IN_MEMORY memory whose id is
     * the session id) resumes under a 2.0.0 ReActAgent: its legacy loader reads {@code
     * memory_messages}, which the server answers from that memory.
     */
    @Test
    void aConversationOfA1xRemoteMemoryResumesUnder2x() {
        String sessionId = "legacy-" + UUID.randomUUID();
        try (RemoteConnection connection = RemoteConnection.builder().target(server.target()).build()) {
            connection.call("MemoryService/CreateMemory", false, () -> connection.memoryService().createMemory(
                    CreateMemoryRequest.newBuilder().setMemoryId(sessionId).setKind(MemoryKind.MEMORY_KIND_IN_MEMORY).build()));
            AddMessagesRequest.Builder add = AddMessagesRequest.newBuilder().setMemoryId(sessionId).setRequestId(UUID.randomUUID().toString());
            String[][] turns = {{"ROLE_USER", "user", "我喜欢喝茶"}, {"ROLE_ASSISTANT", "Assistant", "记住了: 你喜欢茶。"}};
            for (String[] t : turns) {
                add.addMessages(dev.agentscopememory.grpc.v1.Msg.newBuilder()
                        .setId(UUID.randomUUID().toString()).setName(t[1]).setRole(Role.valueOf(t[0]))
                        .addContent(ContentBlock.newBuilder().setText(dev.agentscopememory.grpc.v1.TextBlock.newBuilder().setText(t[2])))
                        .setTimestamp("2026-01-02 03:04:05.000"));
            }
            AddMessagesRequest request = add.build();
            connection.call("MemoryService/AddMessages", true, () -> connection.memoryService().addMessages(request));
        }
        ScriptedModel model = new ScriptedModel(Scripts.answers("2.x", 2));
        try (RemoteAgentStateStore store = store(ConflictPolicy.MERGE_APPENDED)) {
            assertTrue(store.exists(null, sessionId));
            ReActAgent agent = Scripts.agent(model, store);
            Scripts.call(agent, null, sessionId, "我喜欢什么?");
            List<String> seen = model.calls().get(0).stream().map(Msg::getTextContent).toList();
            assertTrue(seen.containsAll(List.of("我喜欢喝茶", "记住了: 你喜欢茶。", "我喜欢什么?")), seen.toString());
            AgentState state = store.get(null, sessionId, "agent_state", AgentState.class).orElseThrow();
            assertEquals(List.of("我喜欢喝茶", "记住了: 你喜欢茶。", "我喜欢什么?", "2.x answer 0"), texts(state));

            // Deleted, the session stays deleted: the legacy loader does not bring the 1.x
            // conversation back, and exists() agrees.
            store.delete(null, sessionId);
            assertFalse(store.exists(null, sessionId));
            Scripts.call(agent, null, sessionId, "我喜欢什么?");
            List<String> afterDelete = model.calls().get(1).stream().map(Msg::getTextContent).toList();
            assertFalse(afterDelete.contains("我喜欢喝茶"), afterDelete.toString());
        }
    }
}
