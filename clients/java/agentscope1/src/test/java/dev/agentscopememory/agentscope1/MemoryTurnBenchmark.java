package dev.agentscopememory.agentscope1;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.memory.Memory;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.tool.Toolkit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Supplier;

/**
 * Not a test: what the remote memory adds to a ReActAgent turn with three tool rounds (the whole
 * turn against the same turn on InMemoryMemory, and the time inside memory calls of each),
 * measured in the same run. Prints one JSON object per scenario.
 *
 * <pre>
 * cd clients/java
 * mvn -q -pl agentscope1 -am test-compile dependency:build-classpath -Dmdep.includeScope=test \
 *     -Dmdep.outputFile=target/cp.txt
 * cd agentscope1
 * java -cp target/classes:target/test-classes:$(cat target/cp.txt) \
 *     dev.agentscopememory.agentscope1.MemoryTurnBenchmark [turns [warm-up turns [history]]]
 * </pre>
 */
public final class MemoryTurnBenchmark {

    /** Counts calls and the time spent in them. */
    static final class TimedMemory implements Memory {
        final Memory inner;
        long nanos;
        long getNanos;
        /** The whole {@code agent.call}, memory calls and all. */
        long wallNanos;
        int gets;
        int adds;

        TimedMemory(Memory inner) {
            this.inner = inner;
        }

        private <T> T timed(Supplier<T> call) {
            long t = System.nanoTime();
            try {
                return call.get();
            } finally {
                nanos += System.nanoTime() - t;
            }
        }

        @Override
        public void addMessage(Msg message) {
            adds++;
            timed(() -> {
                inner.addMessage(message);
                return null;
            });
        }

        @Override
        public List<Msg> getMessages() {
            gets++;
            long before = nanos;
            List<Msg> out = timed(inner::getMessages);
            getNanos += nanos - before;
            return out;
        }

        @Override
        public void deleteMessage(int index) {
            timed(() -> {
                inner.deleteMessage(index);
                return null;
            });
        }

        @Override
        public void clear() {
            timed(() -> {
                inner.clear();
                return null;
            });
        }
    }

    /** Tool call ids are new every turn, as a model's are: a repeated id would match an old result. */
    static List<List<ContentBlock>> threeToolRounds() {
        String turn = UUID.randomUUID().toString().substring(0, 8);
        List<List<ContentBlock>> script = new ArrayList<>();
        String[] cities = {"Paris", "Berlin", "Rome"};
        for (int i = 0; i < 3; i++) {
            script.add(List.of(TextBlock.builder().text("Checking " + cities[i]).build(),
                    new ToolUseBlock("call_" + turn + "_" + i, "get_weather", Map.of("city", cities[i]),
                            "{\"city\":\"" + cities[i] + "\"}", Map.of())));
        }
        script.add(List.of(TextBlock.builder().text("Done.").build()));
        return script;
    }

    static TimedMemory turn(Memory memory) {
        TimedMemory timed = new TimedMemory(memory);
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(new WeatherTools());
        ReActAgent agent = ReActAgent.builder().name("Assistant").sysPrompt("sys")
                .model(new ScriptedModel(threeToolRounds())).toolkit(toolkit).memory(timed).maxIters(6).build();
        long t = System.nanoTime();
        agent.call(Msg.builder().role(MsgRole.USER).name("user").textContent("Weather in three cities?").build())
                .block(Duration.ofSeconds(60));
        timed.wallNanos = System.nanoTime() - t;
        return timed;
    }

    static double median(long[] values) {
        long[] v = values.clone();
        Arrays.sort(v);
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2.0;
    }

    /** A conversation of {@code n} earlier messages: user questions and assistant answers. */
    static List<Msg> history(int n) {
        List<Msg> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(Msg.builder().role(i % 2 == 0 ? MsgRole.USER : MsgRole.ASSISTANT)
                    .name(i % 2 == 0 ? "user" : "Assistant")
                    .textContent("Earlier message " + i + ": a question or answer about the weather in a European city,"
                            + " with a little detail so that it is about as long as a real one.")
                    .build());
        }
        return out;
    }

    /**
     * Times {@code turns} turns after {@code warmup} untimed ones and prints one JSON line. With
     * {@code history == 0} every turn starts a new conversation; otherwise one conversation
     * starting with that many messages goes on turn after turn, on both memories. With {@code
     * other} (a second client on its own connection), that client adds a message to the same
     * conversation before every turn, untimed, so the agent's client finds the history changed by
     * someone else each turn (the same message goes to the in-memory baseline). {@code coherent}
     * and {@code confirmation} are the builder's {@code coherentCache} and {@code
     * addConfirmation} (the defaults: true, {@code MODEL_OUTPUT}); adds still pending after the
     * turn ({@code ON_FLUSH}) are flushed after it, timed apart ({@code flush_ms_after_turn}), as
     * an application that wants the turn durable before answering would.
     */
    static void scenario(RemoteConnection conn, int history, int turns, int warmup, RemoteConnection other,
            boolean coherent, AddConfirmation confirmation, boolean report) {
        Supplier<Memory> local;
        Supplier<Memory> remote;
        Runnable before = () -> { };
        if (history == 0) {
            local = InMemoryMemory::new;
            // A new conversation every turn; a coherent one is closed after its turn (its watch ends).
            RemoteMemory[] last = new RemoteMemory[1];
            remote = () -> {
                if (last[0] != null) {
                    last[0].close();
                }
                last[0] = RemoteMemory.builder().connection(conn).memoryId("bench-" + UUID.randomUUID())
                        .coherentCache(coherent).addConfirmation(confirmation).build();
                return last[0];
            };
        } else {
            InMemoryMemory localMemory = new InMemoryMemory();
            history(history).forEach(localMemory::addMessage);
            String memoryId = "bench-long-" + UUID.randomUUID();
            RemoteMemory remoteMemory = RemoteMemory.builder().connection(conn).memoryId(memoryId)
                    .coherentCache(coherent).addConfirmation(confirmation).build();
            remoteMemory.addMessages(history(history));
            local = () -> localMemory;
            remote = () -> remoteMemory;
            if (other != null) {
                // The other agent's client is configured as this one.
                RemoteMemory otherMemory = RemoteMemory.builder().connection(other).memoryId(memoryId)
                        .coherentCache(coherent).addConfirmation(confirmation).build();
                before = () -> {
                    Msg note = Msg.builder().role(MsgRole.USER).name("observer")
                            .textContent("A note from another agent: " + UUID.randomUUID()).build();
                    otherMemory.addMessage(note);
                    otherMemory.flush(); // the other agent's turn is over
                    localMemory.addMessage(note);
                };
            }
        }
        for (int i = 0; i < warmup; i++) { // JIT, channel, server
            before.run();
            turn(local.get());
            flush(turn(remote.get()));
        }
        long[] localNanos = new long[turns];
        long[] remoteNanos = new long[turns];
        long[] remoteGets = new long[turns];
        long[] flushNanos = new long[turns];
        long[] localWall = new long[turns];
        long[] remoteWall = new long[turns];
        long[] wallOverhead = new long[turns];
        int gets = 0;
        int adds = 0;
        for (int i = 0; i < turns; i++) {
            before.run();
            TimedMemory l = turn(local.get());
            localNanos[i] = l.nanos;
            localWall[i] = l.wallNanos;
            TimedMemory r = turn(remote.get());
            remoteNanos[i] = r.nanos;
            remoteWall[i] = r.wallNanos;
            wallOverhead[i] = r.wallNanos - l.wallNanos;
            remoteGets[i] = r.getNanos;
            flushNanos[i] = flush(r);
            gets = r.gets;
            adds = r.adds;
        }
        if (!report) {
            return;
        }
        double l = median(localNanos) / 1e6;
        double rm = median(remoteNanos) / 1e6;
        // The added cost of the remote memory per turn: the turn's whole time against the same
        // turn on InMemoryMemory (taken just before it), not only the time inside memory calls: a
        // remote read copies each message when the agent first reads it from the list, after the
        // call returned.
        System.out.printf(
                "{\"history_messages\":%d,\"other_writer\":%b,\"coherent_cache\":%b,\"add_confirmation\":\"%s\","
                        + "\"flush_ms_after_turn\":%.3f,\"turns\":%d,\"warmup_turns\":%d,\"tool_rounds\":3,"
                        + "\"getMessages_per_turn\":%d,\"addMessage_per_turn\":%d,"
                        + "\"overhead_ms_per_turn\":%.3f,\"in_memory_turn_ms\":%.3f,\"remote_turn_ms\":%.3f,"
                        + "\"ratio\":%.1f,\"in_memory_calls_ms_per_turn\":%.3f,\"remote_calls_ms_per_turn\":%.3f,"
                        + "\"remote_getMessages_ms_per_call\":%.3f,\"remote_addMessage_ms_per_call\":%.3f}%n",
                history, other != null, coherent, coherent ? confirmation : AddConfirmation.EVERY_ADD,
                median(flushNanos) / 1e6, turns, warmup, gets, adds, median(wallOverhead) / 1e6,
                median(localWall) / 1e6, median(remoteWall) / 1e6, median(remoteWall) / median(localWall), l, rm,
                median(remoteGets) / 1e6 / gets, (rm - median(remoteGets) / 1e6) / adds);
    }

    /** Flushes the turn's pending adds (those that did not wait); returns how long that took. */
    static long flush(TimedMemory turn) {
        long t = System.nanoTime();
        ((AbstractRemoteMemory) turn.inner).flush();
        return System.nanoTime() - t;
    }

    /**
     * The cost of one {@code addMessage} alone, in a conversation of {@code history} messages:
     * {@code n} adds after {@code warmup} untimed ones, one call each, and prints one JSON line.
     * With {@code coherent}, once the watch is open, adds travel over it; otherwise each is an
     * {@code AddMessages} call.
     */
    static void addCost(RemoteConnection conn, int n, int warmup, boolean coherent) throws InterruptedException {
        try (RemoteMemory memory = RemoteMemory.builder().connection(conn).memoryId("bench-adds-" + UUID.randomUUID())
                .coherentCache(coherent).addConfirmation(AddConfirmation.EVERY_ADD).build()) {
            memory.addMessages(history(100));
            // Reads open the watch (in the background); wait until reads are served from the copy.
            for (int i = 0; i < 500 && coherent && !memory.servesFromCache(); i++) {
                memory.getMessages();
                Thread.sleep(10);
            }
            List<Msg> messages = history(warmup + n);
            long[] nanos = new long[n];
            for (int i = 0; i < warmup + n; i++) {
                long t = System.nanoTime();
                memory.addMessage(messages.get(i));
                if (i >= warmup) {
                    nanos[i - warmup] = System.nanoTime() - t;
                }
            }
            System.out.printf("{\"add_only\":true,\"coherent_cache\":%b,\"adds\":%d,\"addMessage_ms_p50\":%.3f}%n",
                    coherent, n, median(nanos) / 1e6);
        }
    }

    public static void main(String[] args) throws Exception {
        int turns = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        // The JIT needs a few hundred calls before per-call times settle (10 warm-up turns left
        // them ~1.8x higher).
        int warmup = args.length > 1 ? Integer.parseInt(args[1]) : 50;
        int history = args.length > 2 ? Integer.parseInt(args[2]) : 1000;
        try (TestServer server = TestServer.start();
                RemoteConnection conn = RemoteConnection.builder().target(server.target()).build();
                RemoteConnection other = RemoteConnection.builder().target(server.target()).build()) {
            for (boolean coherent : new boolean[] {false, true}) {
                addCost(conn, 4 * turns, 4 * warmup, coherent);
            }
            // The defaults (coherent cache, the model's output waits), then without coherent
            // caching (a call per read and per add), then every add waiting, then none.
            Object[][] modes = {
                {true, AddConfirmation.MODEL_OUTPUT},
                {false, AddConfirmation.EVERY_ADD},
                {true, AddConfirmation.EVERY_ADD},
                {true, AddConfirmation.ON_FLUSH},
            };
            // First every mode briefly, unreported: the JIT compiles each one's paths, so no
            // mode is measured on code still being compiled (the first one measured otherwise is).
            for (boolean report : new boolean[] {false, true}) {
                for (Object[] mode : modes) {
                    boolean coherent = (Boolean) mode[0];
                    AddConfirmation confirmation = (AddConfirmation) mode[1];
                    int n = report ? turns : turns / 4;
                    scenario(conn, 0, n, warmup, null, coherent, confirmation, report);
                    scenario(conn, history, n / 2, 10, null, coherent, confirmation, report);
                    scenario(conn, history, n / 2, 10, other, coherent, confirmation, report);
                }
            }
        }
    }
}
