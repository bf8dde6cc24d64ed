package dev.agentscopememory.agentscope2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.AddMessagesRequest;
import dev.agentscopememory.grpc.v1.CreateMemoryRequest;
import dev.agentscopememory.grpc.v1.MemoryKind;
import dev.agentscopememory.grpc.v1.Role;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.RuntimeContext;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.model.ChatResponse;
import io.agentscope.core.model.GenerateOptions;
import io.agentscope.core.model.Model;
import io.agentscope.core.model.ToolSchema;
import io.agentscope.core.permission.PermissionMode;
import io.agentscope.core.state.AgentState;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Two 2.0.0 ReActAgents of one process share one store (one bean of an application) and start
 * the same new session at once: both load it as absent, the first finishes its turn, then the
 * second saves. The second save must not overwrite the first turn.
 */
class OneStoreManyAgentsTest {

    private static TestServer server;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
    }

    /** Answers once {@code gate} opens, after counting down {@code entered}. */
    record GatedModel(String who, CountDownLatch entered, CountDownLatch gate) implements Model {
        @Override
        public Flux<ChatResponse> stream(List<Msg> messages, List<ToolSchema> tools, GenerateOptions options) {
            return Mono.fromCallable(() -> {
                entered.countDown();
                assertTrue(gate.await(30, TimeUnit.SECONDS));
                return ChatResponse.builder().id(who + "-" + UUID.randomUUID())
                        .content(List.<ContentBlock>of(TextBlock.builder().text(who + " answer").build())).build();
            }).subscribeOn(Schedulers.boundedElastic()).flux();
        }

        @Override
        public String getModelName() {
            return "gated";
        }
    }

    /** Runs A's and B's first turns of session {@code s}: both load, A saves, then B saves. */
    static Throwable firstTurnsOneAfterTheOther(RemoteAgentStateStore store, String s) throws Exception {
        CountDownLatch entered = new CountDownLatch(2);
        CountDownLatch gateA = new CountDownLatch(1);
        CountDownLatch gateB = new CountDownLatch(1);
        ReActAgent a = ReActAgent.builder().name("A").model(new GatedModel("A", entered, gateA)).stateStore(store).build();
        ReActAgent b = ReActAgent.builder().name("B").model(new GatedModel("B", entered, gateB)).stateStore(store).build();
        RuntimeContext context = RuntimeContext.builder().userId("u").sessionId(s).build();
        CompletableFuture<Msg> first = a.call(List.of(Scripts.user("from a")), context).toFuture();
        CompletableFuture<Msg> second = b.call(List.of(Scripts.user("from b")), context).toFuture();
        assertTrue(entered.await(30, TimeUnit.SECONDS)); // both loaded the session as absent
        gateA.countDown();
        first.get(30, TimeUnit.SECONDS);
        gateB.countDown();
        try {
            second.get(30, TimeUnit.SECONDS);
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    static List<String> texts(RemoteAgentStateStore store, String s) {
        return store.get("u", s, "agent_state", AgentState.class).orElseThrow()
                .getContext().stream().map(Msg::getTextContent).toList();
    }

    @Test
    void theSecondFirstTurnIsMergedNotOverwriting() throws Exception {
        String s = "新会话-" + UUID.randomUUID();
        try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().target(server.target()).build()) {
            assertEquals(null, firstTurnsOneAfterTheOther(store, s));
            assertEquals(List.of("from a", "A answer", "from b", "B answer"), texts(store, s));
        }
    }

    /**
     * Both agents begin a 1.x session (a 1.x RemoteMemory's conversation, read through {@code
     * memory_messages} by 2.0.0's legacy loader): the second save merged its whole context, the
     * 1.x history included, so the history was stored twice.
     */
    @Test
    void twoFirstTurnsOnA1xSessionKeepItsHistoryOnce() throws Exception {
        String s = "旧会话-" + UUID.randomUUID();
        try (RemoteConnection connection = RemoteConnection.builder().target(server.target()).build()) {
            connection.call("MemoryService/CreateMemory", false, () -> connection.memoryService().createMemory(
                    CreateMemoryRequest.newBuilder().setMemoryId(s).setKind(MemoryKind.MEMORY_KIND_IN_MEMORY).build()));
            AddMessagesRequest.Builder add = AddMessagesRequest.newBuilder().setMemoryId(s).setRequestId(UUID.randomUUID().toString());
            String[][] turns = {{"ROLE_USER", "user", "我喜欢喝茶"}, {"ROLE_ASSISTANT", "Assistant", "记住了"}};
            for (String[] t : turns) {
                add.addMessages(dev.agentscopememory.grpc.v1.Msg.newBuilder()
                        .setId(UUID.randomUUID().toString()).setName(t[1]).setRole(Role.valueOf(t[0]))
                        .addContent(dev.agentscopememory.grpc.v1.ContentBlock.newBuilder()
                                .setText(dev.agentscopememory.grpc.v1.TextBlock.newBuilder().setText(t[2])))
                        .setTimestamp("2026-01-02 03:04:05.000"));
            }
            AddMessagesRequest request = add.build();
            connection.call("MemoryService/AddMessages", true, () -> connection.memoryService().addMessages(request));
        }
        try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().target(server.target()).build()) {
            assertEquals(null, firstTurnsOneAfterTheOther(store, s));
            assertEquals(List.of("我喜欢喝茶", "记住了", "from a", "A answer", "from b", "B answer"), texts(store, s));
        }
    }

    @Test
    void underFailTheSecondFirstTurnIsAConflict() throws Exception {
        String s = "新会话-" + UUID.randomUUID();
        try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().target(server.target())
                .conflictPolicy(ConflictPolicy.FAIL).build()) {
            Throwable failure = firstTurnsOneAfterTheOther(store, s);
            assertInstanceOf(ConcurrentStateModificationException.class, failure);
            assertEquals(List.of("from a", "A answer"), texts(store, s));
        }
    }

    /**
     * A 2.0.0 ReActAgent saves the state of its last call again on {@code setPermissionMode} (and
     * {@code saveAgentState}). When the session had been read as absent without a save following
     * (here {@code getPermissionMode} before the first call, or the application reading the
     * session before it began), that second save counted as a new session's first: MERGE_APPENDED
     * stored the conversation twice and lost the new mode, FAIL refused it as a conflict.
     */
    @Test
    void savingTheCallsStateAgainIsNeitherAConflictNorADuplicate() {
        for (ConflictPolicy policy : List.of(ConflictPolicy.MERGE_APPENDED, ConflictPolicy.FAIL)) {
            String s = "新会话-" + UUID.randomUUID();
            String t = "新会话-" + UUID.randomUUID();
            try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().target(server.target())
                    .conflictPolicy(policy).build()) {
                ReActAgent agent = Scripts.agent(new ScriptedModel(Scripts.answers("A", 2)), store);
                assertEquals(PermissionMode.DEFAULT, agent.getPermissionMode("u", s));
                Scripts.call(agent, "u", s, "你好");
                agent.setPermissionMode("u", s, PermissionMode.BYPASS);
                AgentState stored = store.get("u", s, "agent_state", AgentState.class).orElseThrow();
                assertEquals(List.of("你好", "A answer 0"), texts(store, s), policy.name());
                assertEquals(PermissionMode.BYPASS, stored.getPermissionContext().getMode(), policy.name());

                assertTrue(store.get("u", t, "agent_state", AgentState.class).isEmpty());
                Scripts.call(agent, "u", t, "再见");
                agent.saveAgentState("u", t);
                assertEquals(List.of("再见", "A answer 1"), texts(store, t), policy.name());
            }
        }
    }
}
