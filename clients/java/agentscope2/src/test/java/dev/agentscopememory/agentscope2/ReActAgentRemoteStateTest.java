package dev.agentscopememory.agentscope2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.state.AgentState;
import io.agentscope.core.state.AgentStateStore;
import io.agentscope.core.state.InMemoryAgentStateStore;
import io.agentscope.core.util.JsonUtils;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * A real AgentScope-Java 2.0.0 ReActAgent with a scripted model runs tool-using turns on the
 * remote store and on 2.0's InMemoryAgentStateStore: the stored state is the same, and the server
 * restarts between the turns without the conversation noticing.
 */
class ReActAgentRemoteStateTest {

    static final String USER = "爱丽丝";
    // No "/": a 2.0.0 ReActAgent splits such a session id between user and session (upstream #2475).
    static final String SESSION = "天气 chat 1";

    record Run(String stateJson, ScriptedModel model, List<Msg> replies) {}

    static AgentState stored(AgentStateStore store) {
        return store.get(USER, SESSION, "agent_state", AgentState.class).orElseThrow();
    }

    @Test
    void remoteStateEqualsInMemoryStateAcrossARestart() throws Exception {
        ScriptedModel localModel = new ScriptedModel(Scripts.weatherTurns());
        InMemoryAgentStateStore local = new InMemoryAgentStateStore();
        ReActAgent localAgent = Scripts.agent(localModel, local);
        List<Msg> localReplies = List.of(
                Scripts.call(localAgent, USER, SESSION, "Weather in Paris and 北京? Also 19+23."),
                Scripts.call(localAgent, USER, SESSION, "And Rome?"));
        Run expected = new Run(JsonUtils.getJsonCodec().toJson(stored(local)), localModel, localReplies);

        TestServer server = TestServer.start();
        try {
            ScriptedModel remoteModel = new ScriptedModel(Scripts.weatherTurns());
            try (RemoteAgentStateStore remote = RemoteAgentStateStore.builder().target(server.target()).build()) {
                ReActAgent agent = Scripts.agent(remoteModel, remote);
                Msg first = Scripts.call(agent, USER, SESSION, "Weather in Paris and 北京? Also 19+23.");
                // The server goes away and comes back on the same port and data.
                server.stop();
                server = TestServer.restart(server);
                Msg second = Scripts.call(agent, USER, SESSION, "And Rome?");

                assertEquals(5, remoteModel.used());
                JsonNode want = Scripts.comparable(expected.stateJson());
                assertEquals(want, Scripts.comparable(JsonUtils.getJsonCodec().toJson(stored(remote))));
                // user, reasoning(tool), result, reasoning(2 tools), 2 results, answer, user, reasoning, result, answer
                assertEquals(11, stored(remote).getContext().size());
                assertEquals(MsgRole.TOOL, stored(remote).getContext().get(2).getRole());
                // The model saw the same context at every step, loaded from the server.
                for (int i = 0; i < 5; i++) {
                    assertEquals(comparableMsgs(localModel.calls().get(i)), comparableMsgs(remoteModel.calls().get(i)), "model call " + i);
                }
                assertEquals(localReplies.get(1).getTextContent(), second.getTextContent());
                assertTrue(first.getTextContent().contains("42"));
            }
            // Another process (a fresh store) sees the same state, and the decoded session id.
            try (RemoteAgentStateStore other = RemoteAgentStateStore.builder().target(server.target()).build()) {
                assertEquals(Scripts.comparable(expected.stateJson()),
                        Scripts.comparable(JsonUtils.getJsonCodec().toJson(stored(other))));
                assertEquals(Set.of(SESSION), other.listSessionIds(USER));
                assertTrue(other.exists(USER, SESSION));
            }
        } finally {
            server.close();
        }
    }

    static JsonNode comparableMsgs(List<Msg> msgs) throws Exception {
        StringBuilder json = new StringBuilder("{\"context\":[");
        for (int i = 0; i < msgs.size(); i++) {
            json.append(i == 0 ? "" : ",").append(JsonUtils.getJsonCodec().toJson(msgs.get(i)));
        }
        return Scripts.comparable(json.append("]}").toString());
    }
}
