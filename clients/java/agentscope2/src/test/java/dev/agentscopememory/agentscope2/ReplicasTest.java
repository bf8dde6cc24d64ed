package dev.agentscopememory.agentscope2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.Msg;
import io.agentscope.core.state.AgentState;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Two 2.0.0 ReActAgents on one session, each through its own server replica, both replicas on one
 * PostgreSQL database (started by tests/postgres_server.py, as the Python tests start it). Their
 * turns start together, so their loads and saves race.
 *
 * <p>With versioning (the default MERGE_APPENDED policy) no turn is lost: a save that lost the
 * race is merged onto the winner's state. With OVERWRITE (what AgentScope's own stores do) the
 * last save wins and the other agent's concurrent turn is lost; the test reports how many.
 */
class ReplicasTest {

    private static final int TURNS = 6;

    private static Process postgres;
    private static TestServer first;
    private static TestServer second;

    @BeforeAll
    static void start() throws Exception {
        postgres = new ProcessBuilder(TestServer.repo().resolve(".venv/bin/python").toString(),
                TestServer.repo().resolve("tests/postgres_server.py").toString())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String dsn = new BufferedReader(new InputStreamReader(postgres.getInputStream(), StandardCharsets.UTF_8)).readLine();
        if (dsn == null || !dsn.startsWith("postgresql://")) {
            postgres.destroy();
            String why = "PostgreSQL did not start (tests/postgres_server.py printed " + dsn + ")";
            // As in the Python tests: skipped where PostgreSQL is missing, failed in CI.
            if ("1".equals(System.getenv("ASM_TEST_REQUIRE_DEPENDENCIES"))) {
                throw new IllegalStateException(why);
            }
            org.junit.jupiter.api.Assumptions.abort(why);
        }
        List<String> flags = List.of("--store", "postgres", "--postgres-dsn", dsn);
        first = TestServer.start(Map.of(), flags);
        second = TestServer.start(Map.of(), flags);
    }

    @AfterAll
    static void stop() throws Exception {
        if (first != null) first.close();
        if (second != null) second.close();
        if (postgres != null) {
            postgres.getOutputStream().close(); // the script stops PostgreSQL when stdin closes
            if (!postgres.waitFor(60, TimeUnit.SECONDS)) {
                postgres.destroyForcibly();
            }
        }
    }

    /** Runs both agents' turns in lock step; returns the texts of the stored context. */
    static List<String> race(ConflictPolicy policy) throws Exception {
        String session = "共享-" + UUID.randomUUID();
        CyclicBarrier together = new CyclicBarrier(2);
        List<Throwable> failures = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (String who : List.of("A", "B")) {
            TestServer replica = who.equals("A") ? first : second;
            threads.add(new Thread(() -> {
                try (RemoteAgentStateStore store = RemoteAgentStateStore.builder().target(replica.target())
                        .conflictPolicy(policy).maxMergeAttempts(20).build()) {
                    ReActAgent agent = Scripts.agent(new ScriptedModel(Scripts.answers(who, TURNS), who), store);
                    for (int i = 0; i < TURNS; i++) {
                        together.await(30, TimeUnit.SECONDS);
                        Scripts.call(agent, "team", session, who + " asks " + i);
                    }
                } catch (Throwable t) {
                    synchronized (failures) {
                        failures.add(t);
                    }
                    together.reset();
                }
            }, "agent-" + who));
        }
        threads.forEach(Thread::start);
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(120));
        }
        if (!failures.isEmpty()) {
            throw new AssertionError("an agent failed", failures.get(0));
        }
        try (RemoteAgentStateStore reader = RemoteAgentStateStore.builder().target(first.target()).build()) {
            AgentState state = reader.get("team", session, "agent_state", AgentState.class).orElseThrow();
            return state.getContext().stream().map(Msg::getTextContent).toList();
        }
    }

    static List<String> turnsOf(String who, List<String> texts) {
        return texts.stream().filter(t -> t.startsWith(who + " ")).toList();
    }

    @Test
    void withVersioningNoTurnIsLost() throws Exception {
        List<String> texts = race(ConflictPolicy.MERGE_APPENDED);
        for (String who : List.of("A", "B")) {
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < TURNS; i++) {
                expected.add(who + " asks " + i);
                expected.add(who + " answer " + i);
            }
            assertEquals(expected, turnsOf(who, texts), "every turn of " + who + ", in order");
        }
        assertEquals(4 * TURNS, texts.size());
    }

    @Test
    void withoutVersioningTheLastSaveWins() throws Exception {
        List<String> texts = race(ConflictPolicy.OVERWRITE);
        int lost = 4 * TURNS - texts.size();
        // Reported, not asserted: how many are lost depends on timing.
        System.out.println("OVERWRITE on two replicas: " + lost + " of " + (4 * TURNS) + " messages lost");
        assertTrue(texts.size() <= 4 * TURNS);
        // What is kept is whole turns: a question is always followed by its answer.
        for (int i = 0; i < texts.size(); i += 2) {
            assertEquals(texts.get(i).replace(" asks ", " answer "), texts.get(i + 1));
        }
    }
}
