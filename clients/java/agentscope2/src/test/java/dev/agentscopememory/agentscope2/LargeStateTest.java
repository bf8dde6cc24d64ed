package dev.agentscopememory.agentscope2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.AgentStateServiceGrpc;
import dev.agentscopememory.grpc.v1.GetValueRequest;
import dev.agentscopememory.grpc.v1.StateSlot;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.state.AgentState;
import io.agentscope.core.state.AgentStateStore;
import io.agentscope.core.state.InMemoryAgentStateStore;
import io.agentscope.core.tool.Tool;
import io.agentscope.core.tool.ToolParam;
import io.agentscope.core.tool.Toolkit;
import io.agentscope.core.util.JsonUtils;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A 2.0.0 ReActAgent whose state outgrows one gRPC message (4 MiB): its saves go through
 * StreamPutValue and its loads through StreamGetValue, with every conflict policy as before.
 */
class LargeStateTest {

    private static TestServer server;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
    }

    /** A tool whose results are large: over 1 MB of UTF-8 each, Chinese and emoji included. */
    public static class ReportTools {
        @Tool(name = "read_report", description = "Reads a long report")
        public String readReport(@ToolParam(name = "part", description = "Part number") int part) {
            StringBuilder text = new StringBuilder("第" + part + "部分 📄\n");
            while (text.length() < 700_000) {
                text.append("北京晴25C😀 \"q\" \\ 🌦️ line ").append(part).append('\n');
            }
            return text.toString();
        }
    }

    static List<List<ContentBlock>> reportTurns(int turns) {
        List<List<ContentBlock>> script = new ArrayList<>();
        for (int i = 0; i < turns; i++) {
            script.add(List.of(new ToolUseBlock("call_" + i, "read_report", Map.of("part", i), "{\"part\":" + i + "}", Map.of())));
            script.add(List.of(TextBlock.builder().text("第" + i + "部分读完了 ✅").build()));
        }
        return script;
    }

    static ReActAgent agent(ScriptedModel model, AgentStateStore store) {
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(new ReportTools());
        return ReActAgent.builder().name("Reader").sysPrompt("You read reports.")
                .model(model).toolkit(toolkit).maxIters(4).stateStore(store).build();
    }

    static long utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8).length;
    }

    @Test
    void aReActAgentKeepsWorkingPastTheOldLimitAndItsStateRoundTrips() throws Exception {
        int turns = 6;
        String session = "长会话 " + UUID.randomUUID();
        ScriptedModel localModel = new ScriptedModel(reportTurns(turns));
        InMemoryAgentStateStore local = new InMemoryAgentStateStore();
        ReActAgent localAgent = agent(localModel, local);
        ScriptedModel remoteModel = new ScriptedModel(reportTurns(turns));
        try (RemoteAgentStateStore remote = RemoteAgentStateStore.builder().target(server.target()).build()) {
            ReActAgent agent = agent(remoteModel, remote);
            for (int i = 0; i < turns; i++) {
                Msg reply = Scripts.call(agent, "爱丽丝", session, "Read part " + i);
                Scripts.call(localAgent, "爱丽丝", session, "Read part " + i);
                assertEquals("第" + i + "部分读完了 ✅", reply.getTextContent());
            }
            assertEquals(2 * turns, remoteModel.used());
            // The model saw the whole context at every step: each load brought every result back.
            for (int i = 0; i < 2 * turns; i++) {
                assertEquals(ReActAgentRemoteStateTest.comparableMsgs(localModel.calls().get(i)),
                        ReActAgentRemoteStateTest.comparableMsgs(remoteModel.calls().get(i)), "model call " + i);
            }
        }
        String want = JsonUtils.getJsonCodec().toJson(local.get("爱丽丝", session, "agent_state", AgentState.class).orElseThrow());
        assertTrue(utf8(want) > 6 * 1024 * 1024, "state of " + utf8(want) + " bytes");
        // Another process reads it back whole; its JSON re-serialises byte for byte.
        try (RemoteAgentStateStore other = RemoteAgentStateStore.builder().target(server.target()).build()) {
            VersionedState<AgentState> read = other.getVersioned("爱丽丝", session, "agent_state", AgentState.class);
            assertEquals(turns, read.version());
            String got = JsonUtils.getJsonCodec().toJson(read.value());
            assertEquals(Scripts.comparable(want), Scripts.comparable(got));
            assertEquals(4 * turns, read.value().getContext().size());
            assertEquals(MsgRole.TOOL, read.value().getContext().get(2).getRole());
            // And saves it back (a compare-and-set in pieces): the same bytes come back again.
            other.save("爱丽丝", session, "agent_state", read.value());
            try (RemoteAgentStateStore third = RemoteAgentStateStore.builder().target(server.target()).build()) {
                VersionedState<AgentState> again = third.getVersioned("爱丽丝", session, "agent_state", AgentState.class);
                assertEquals(turns + 1, again.version());
                assertEquals(got, JsonUtils.getJsonCodec().toJson(again.value()));
            }
        }
        // A stock client's unary GetValue gets a clear answer naming the stream, not a transport error.
        ManagedChannel stock = ManagedChannelBuilder.forTarget(server.target()).usePlaintext().build();
        try {
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> AgentStateServiceGrpc.newBlockingStub(stock)
                    .getValue(GetValueRequest.newBuilder().setSlot(StateSlot.newBuilder().setUserId("爱丽丝").setSessionId(session))
                            .setKey("agent_state").build()));
            assertEquals(Status.Code.FAILED_PRECONDITION, e.getStatus().getCode());
            assertTrue(e.getStatus().getDescription().contains("StreamGetValue"), e.getStatus().getDescription());
        } finally {
            stock.shutdownNow();
        }
    }

    /** Pieces are cut between characters: a surrogate pair on every possible boundary survives. */
    @Test
    void piecesNeverSplitASurrogatePair() {
        String session = "emoji " + UUID.randomUUID();
        try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().target(server.target())
                .conflictPolicy(ConflictPolicy.OVERWRITE).unaryValueBytes(0).build()) {
            for (int shift = 0; shift < 3; shift++) {
                StringBuilder text = new StringBuilder("x".repeat(shift));
                while (text.length() < 3 * 1024 * 1024) {
                    text.append("😀北");
                }
                AgentState state = AgentState.builder().build();
                state.contextMutable().add(Msg.builder().role(MsgRole.USER).name("user").textContent(text.toString()).build());
                store.save(null, session, "agent_state", state);
                AgentState back = store.get(null, session, "agent_state", AgentState.class).orElseThrow();
                assertEquals(text.toString(), back.getContext().get(0).getTextContent(), "shift " + shift);
            }
        }
        int pieceChars = 1024 * 1024 / 3;
        assertEquals(pieceChars - 1, RemoteAgentStateStore.pieceEnd("a".repeat(pieceChars - 1) + "😀", 0));
        assertEquals(pieceChars, RemoteAgentStateStore.pieceEnd("a".repeat(pieceChars) + "😀", 0));
        // As protobuf encodes: a pair is 4 bytes, an unpaired surrogate becomes "?".
        assertEquals(9, RemoteAgentStateStore.utf8Length("ab😀é" + (char) 0xD800));
    }

    /** Two processes race on a state larger than one message: the policies act as on a small one. */
    @Test
    void conflictPoliciesHoldForLargeStates() {
        String big = "大".repeat(2 * 1024 * 1024); // 6 MiB of UTF-8
        for (ConflictPolicy policy : ConflictPolicy.values()) {
            String s = "race " + policy + " " + UUID.randomUUID();
            try (RemoteAgentStateStore seed = RemoteAgentStateStore.builder().target(server.target())
                    .conflictPolicy(ConflictPolicy.OVERWRITE).build()) {
                AgentState state = AgentState.builder().build();
                state.contextMutable().add(VersioningAndResumeTest.msg(big));
                seed.save(null, s, "agent_state", state);
            }
            try (RemoteAgentStateStore a = RemoteAgentStateStore.builder().target(server.target()).conflictPolicy(policy).build();
                    RemoteAgentStateStore b = RemoteAgentStateStore.builder().target(server.target()).conflictPolicy(policy).build()) {
                AgentState sa = a.get(null, s, "agent_state", AgentState.class).orElseThrow();
                AgentState sb = b.get(null, s, "agent_state", AgentState.class).orElseThrow();
                sb.contextMutable().add(VersioningAndResumeTest.msg("from b"));
                b.save(null, s, "agent_state", sb);
                sa.contextMutable().add(VersioningAndResumeTest.msg("from a"));
                List<String> want;
                if (policy == ConflictPolicy.FAIL) {
                    ConcurrentStateModificationException e = assertThrows(ConcurrentStateModificationException.class,
                            () -> a.save(null, s, "agent_state", sa));
                    assertEquals(2, e.getCurrentVersion());
                    want = List.of(big, "from b");
                } else {
                    a.save(null, s, "agent_state", sa);
                    want = policy == ConflictPolicy.MERGE_APPENDED ? List.of(big, "from b", "from a") : List.of(big, "from a");
                }
                assertEquals(want, VersioningAndResumeTest.texts(b.get(null, s, "agent_state", AgentState.class).orElseThrow()), policy.name());
            }
        }
    }
}
