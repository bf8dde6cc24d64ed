package dev.agentscopememory.agentscope1;

import static dev.agentscopememory.agentscope1.SampleMessages.texts;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import dev.agentscopememory.grpc.v1.GetMemoryRequest;
import dev.agentscopememory.grpc.v1.MemoryServiceGrpc;
import dev.agentscopememory.grpc.v1.WatchMessagesResponse;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.tool.Tool;
import io.agentscope.core.tool.Toolkit;
import io.agentscope.core.util.JsonUtils;
import io.grpc.Channel;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The remote memories' defaults: coherent caching with {@link AddConfirmation#MODEL_OUTPUT}. A
 * ReActAgent turn reads from the memory's copy and sends its adds over the watch, yet no tool runs
 * before its call is stored, the agent's reply is returned only once the whole turn is stored, a
 * refused add fails the agent's call, an idle watch is released, and adds still pending when the
 * JVM exits are stored.
 */
class AddConfirmationTest {

    private static final ObjectMapper TREES = new ObjectMapper();

    private ManagedChannel channel;
    private final AtomicInteger reads = new AtomicInteger();
    private final AtomicInteger unaryAdds = new AtomicInteger();
    private final AtomicInteger creates = new AtomicInteger();

    @BeforeEach
    void connect() throws Exception {
        channel = Grpc.newChannelBuilder(TestServer.shared().target(), InsecureChannelCredentials.create()).build();
    }

    @AfterEach
    void close() {
        channel.shutdownNow();
    }

    /** The channel with GetMessages, AddMessages and CreateMemory calls counted. */
    private Channel counted(Channel channel) {
        return CountedCalls.on(channel, Map.of("GetMessages", reads, "AddMessages", unaryAdds, "CreateMemory", creates));
    }

    /** A client that reads the server's messages with a call each time (no copy of its own). */
    private RemoteMemory plain(String id) {
        return RemoteMemory.builder().channel(channel).memoryId(id).coherentCache(false).build();
    }

    private static void until(BooleanSupplier condition) throws InterruptedException {
        for (int i = 0; i < 1000 && !condition.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertTrue(condition.getAsBoolean(), "not reached in time");
    }

    private static List<List<ContentBlock>> peekTwiceThenReply() {
        String turn = UUID.randomUUID().toString().substring(0, 8);
        List<List<ContentBlock>> script = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            script.add(List.of(TextBlock.builder().text("Looking " + i).build(),
                    new ToolUseBlock("call_" + turn + "_" + i, "peek", Map.of(), "{}", Map.of())));
        }
        script.add(List.of(TextBlock.builder().text("All seen.").build()));
        return script;
    }

    private static ReActAgent agent(RemoteMemory memory, List<List<ContentBlock>> script, Object tools) {
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(tools);
        return ReActAgent.builder().name("Assistant").sysPrompt("sys").model(new ScriptedModel(script))
                .toolkit(toolkit).memory(memory).maxIters(6).build();
    }

    private static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    /** A tool that looks at what the server holds when it runs. */
    public static final class Peek {
        private final RemoteMemory server;
        private final RemoteMemory agents;
        final List<Msg> lastStoredAtEachRun = new ArrayList<>();
        final List<Boolean> unconfirmedAtEachRun = new ArrayList<>();

        Peek(RemoteMemory server, RemoteMemory agents) {
            this.server = server;
            this.agents = agents;
        }

        @Tool(name = "peek", description = "Looks at the stored conversation")
        public String peek() {
            unconfirmedAtEachRun.add(agents.hasPendingAdds());
            List<Msg> stored = server.getMessages();
            lastStoredAtEachRun.add(stored.get(stored.size() - 1));
            return "seen " + stored.size();
        }
    }

    @Test
    void aTurnReadsFromTheCopyAndNoToolRunsNorReplyReturnsBeforeWhatLedToItIsStored() throws Exception {
        String id = "defaults-" + UUID.randomUUID();
        try (RemoteMemory memory = RemoteMemory.builder().channel(counted(channel)).memoryId(id).build()) {
            Peek peek = new Peek(plain(id), memory);
            ReActAgent agent = agent(memory, peekTwiceThenReply(), peek);
            agent.call(user("first")).block(Duration.ofSeconds(60));
            until(memory::servesFromCache);

            peek.lastStoredAtEachRun.clear();
            peek.unconfirmedAtEachRun.clear();
            reads.set(0);
            unaryAdds.set(0);
            agent = agent(memory, peekTwiceThenReply(), peek);
            Msg reply = agent.call(user("second")).block(Duration.ofSeconds(60));
            assertEquals("All seen.", reply.getTextContent());
            assertEquals(0, reads.get(), "every read of the turn came from the copy");
            assertEquals(0, unaryAdds.get(), "every add of the turn went over the watch");

            // Each tool ran with every add before it confirmed, its own call the last one stored.
            assertEquals(List.of(false, false), peek.unconfirmedAtEachRun);
            assertFalse(memory.hasPendingAdds(), "the reply came back with the turn confirmed");
            assertEquals(2, peek.lastStoredAtEachRun.size());
            for (Msg last : peek.lastStoredAtEachRun) {
                assertEquals(MsgRole.ASSISTANT, last.getRole());
                assertFalse(last.getContentBlocks(ToolUseBlock.class).isEmpty(), "the tool call is stored");
            }
            // The reply came back once the whole turn was stored: a fresh reader sees all of it.
            List<Msg> stored = plain(id).getMessages();
            assertEquals(12, stored.size());
            assertEquals("All seen.", stored.get(11).getTextContent());
            assertEquals(TREES.readTree(JsonUtils.getJsonCodec().toJson(stored)),
                    TREES.readTree(JsonUtils.getJsonCodec().toJson(memory.getMessages())));
        }
    }

    @Test
    void aNewConversationsFirstReadCreatesItAndStartsTheWatchInOneRoundTrip() throws Exception {
        String id = "新对话-" + UUID.randomUUID();
        try (RemoteMemory memory = RemoteMemory.builder().channel(counted(channel)).memoryId(id)
                .label("用户", "小明").build()) {
            assertEquals(List.of(), memory.getMessages());
            assertEquals(0, creates.get(), "created by the watch, not by CreateMemory");
            assertEquals(0, reads.get(), "an empty new memory needs no read");
            assertTrue(memory.servesFromCache());
            GetMemoryRequest get = GetMemoryRequest.newBuilder().setMemoryId(id).build();
            assertEquals(Map.of("用户", "小明"), MemoryServiceGrpc.newBlockingStub(channel).getMemory(get)
                    .getMemory().getLabelsMap());
            memory.addMessage(user("你好"));
            memory.flush(); // a user's input does not wait; other clients see it once stored
            assertEquals(List.of("你好"), texts(plain(id).getMessages()));
        }
        // A memory that already has messages: the watch starts, and the first read fetches them.
        reads.set(0);
        try (RemoteMemory again = RemoteMemory.builder().channel(counted(channel)).memoryId(id).build()) {
            assertEquals(List.of("你好"), texts(again.getMessages()));
            assertEquals(1, reads.get());
            assertEquals(0, creates.get());
        }
    }

    /** The channel as a server older than {@code WatchStarted.message_count} would answer. */
    private static Channel withoutMessageCount(Channel channel) {
        return AnswerTaps.eachAnswer(channel, message -> message instanceof WatchMessagesResponse r && r.hasStarted()
                ? r.toBuilder().setStarted(r.getStarted().toBuilder().clearMessageCount()).build()
                : message);
    }

    @Test
    void aServerThatDoesNotSayHowManyMessagesThereAreIsRead() throws Exception {
        String id = "older-server-" + UUID.randomUUID();
        RemoteMemory writer = plain(id);
        writer.addMessage(user("one"));
        writer.addMessage(user("two"));
        try (RemoteMemory memory = RemoteMemory.builder().channel(withoutMessageCount(channel)).memoryId(id).build()) {
            assertEquals(List.of("one", "two"), texts(memory.getMessages()));
        }
    }

    @Test
    void withoutCoherentCachingOnTheServerTheMemoryIsCreatedByCreateMemory() throws Exception {
        try (TestServer server = TestServer.start(Map.of("AGENTSCOPE_MEMORY_COHERENT_CACHE", "false"))) {
            ManagedChannel own = Grpc.newChannelBuilder(server.target(), InsecureChannelCredentials.create()).build();
            try (RemoteMemory memory = RemoteMemory.builder().channel(counted(own)).memoryId("no-watch").build()) {
                assertEquals(List.of(), memory.getMessages());
                assertEquals(1, creates.get());
                memory.addMessage(user("hello"));
                assertEquals(List.of("hello"), texts(memory.getMessages()));
            } finally {
                own.shutdownNow();
            }
        }
    }

    /** A tool whose result is larger than the server takes. */
    public static final class Oversized {
        @Tool(name = "peek", description = "Returns far too much")
        public String peek() {
            return "x".repeat(3000);
        }
    }

    @Test
    void aToolResultTheServerRefusesFailsTheAgentsCall() throws Exception {
        try (TestServer server = TestServer.start(Map.of("AGENTSCOPE_MEMORY_MAX_MESSAGE_BYTES", "2000"));
                RemoteMemory memory = RemoteMemory.builder().target(server.target()).memoryId("refused").build()) {
            memory.addMessage(user("hello"));
            memory.getMessages();
            until(memory::servesFromCache);
            ReActAgent agent = agent(memory, peekTwiceThenReply(), new Oversized());
            RuntimeException failed = assertThrows(RuntimeException.class,
                    () -> agent.call(user("look")).block(Duration.ofSeconds(60)));
            Throwable cause = failed;
            while (cause != null && !(cause instanceof RemoteMemoryException.ResourceExhausted)) {
                cause = cause.getCause();
            }
            assertTrue(cause != null, "the server's refusal is what fails the call: " + failed);
            // The tool call was stored before the tool ran; its result was not.
            try (RemoteMemory reader = RemoteMemory.builder().target(server.target()).memoryId("refused")
                    .coherentCache(false).build()) {
                List<Msg> stored = reader.getMessages();
                assertEquals(List.of("hello", "look"), texts(stored.subList(0, 2)));
                assertFalse(stored.get(2).getContentBlocks(ToolUseBlock.class).isEmpty());
                assertTrue(stored.stream().noneMatch(m -> m.getRole() == MsgRole.TOOL), "the result was not stored");
            }
        }
    }

    @Test
    void anIdleWatchIsReleasedAndTheNextReadOpensItAgain() throws Exception {
        String id = "idle-" + UUID.randomUUID();
        try (RemoteMemory memory = RemoteMemory.builder().channel(channel).memoryId(id)
                .watchIdleTimeout(Duration.ofMillis(300)).build()) {
            memory.addMessage(user("hello"));
            memory.getMessages();
            until(memory::servesFromCache);
            until(() -> !memory.watchOpen());
            assertFalse(memory.servesFromCache());
            // Another client's add while nobody watches is seen by the next read.
            plain(id).addMessage(user("while idle"));
            assertEquals(List.of("hello", "while idle"), texts(memory.getMessages()));
            until(() -> {
                memory.getMessages();
                return memory.servesFromCache();
            });
        }
    }

    @Test
    void addsPendingWhenTheJvmExitsAreStored() throws Exception {
        String id = "exit-" + UUID.randomUUID();
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        Path log = Files.createTempFile("exit-flush", ".log");
        Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", classpath, ExitFlushMain.class.getName(), TestServer.shared().target(), id, "3000")
                .redirectErrorStream(true).redirectOutput(log.toFile()).start();
        assertTrue(child.waitFor(120, TimeUnit.SECONDS), "the child JVM exits");
        assertEquals(0, child.exitValue(), Files.readString(log));
        assertTrue(Files.readString(log).contains("pending at exit: true"), Files.readString(log));
        List<Msg> stored = plain(id).getMessages();
        assertEquals(3001, stored.size());
        assertEquals("note 2999", stored.get(3000).getTextContent());
    }

    /** The child JVM: adds without waiting, then exits without closing anything. */
    public static final class ExitFlushMain {
        public static void main(String[] args) throws Exception {
            RemoteMemory memory = RemoteMemory.builder().target(args[0]).memoryId(args[1]).build();
            memory.addMessage(user("hello"));
            memory.getMessages();
            until(memory::servesFromCache);
            int n = Integer.parseInt(args[2]);
            for (int i = 0; i < n; i++) {
                memory.addMessage(user("note " + i));
            }
            System.out.println("pending at exit: " + memory.hasPendingAdds());
            // As a command-line program ends: no close, and exit does not wait for gRPC's threads.
            System.exit(0);
        }
    }
}
