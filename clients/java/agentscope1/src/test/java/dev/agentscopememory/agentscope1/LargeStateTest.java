package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.agentscope1.internal.MsgConverter;
import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.client.TestServer;
import io.agentscope.core.memory.InMemoryMemory;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.session.JsonSession;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * State and histories of any size through a channel with grpc-java's default 4 MiB inbound limit
 * (a connection built from a target sets no other): a message of the largest size the server
 * accepts, and 100 MB of history, through getMessages, getOriginalMemoryMsgs, saveTo and loadFrom.
 */
class LargeStateTest {

    /** The server's default largest message (stored form): 4 MiB less 64 KiB. */
    static final int MAX_MESSAGE_BYTES = 4 * 1024 * 1024 - 64 * 1024;

    private static TestServer server;
    private static RemoteConnection connection;

    @TempDir
    Path dir;

    @BeforeAll
    static void start() throws Exception {
        server = TestServer.shared();
        connection = RemoteConnection.builder().target(server.target()).build();
    }

    @AfterAll
    static void stop() {
        connection.close();
    }

    /** A user message whose wire form is exactly {@code size} bytes, in Chinese and English. */
    static Msg sized(int size, String seed) {
        int pad = size;
        for (int i = 0; i < 10; i++) {
            Msg msg = Msg.builder().id(seed).role(MsgRole.USER).name("user")
                    .textContent(seed + " 大消息 " + "x".repeat(Math.max(pad, 0))).build();
            int actual = MsgConverter.toProto(msg).getSerializedSize();
            if (actual == size) {
                return msg;
            }
            pad += size - actual;
        }
        throw new AssertionError("no padding gives " + size + " bytes");
    }

    static List<String> texts(List<Msg> msgs) {
        return msgs.stream().map(Msg::getTextContent).toList();
    }

    @Test
    void largestMessageThroughAutoContextMemory() {
        Msg big = sized(MAX_MESSAGE_BYTES, "最大");
        Msg before = Msg.builder().role(MsgRole.USER).textContent("before 之前").build();
        Msg after = Msg.builder().role(MsgRole.USER).textContent("after 之后").build();
        JsonSession session = new JsonSession(dir);
        try (RemoteAutoContextMemory memory = RemoteAutoContextMemory.builder().connection(connection)
                .memoryId("big-" + UUID.randomUUID()).build();
                RemoteAutoContextMemory copy = RemoteAutoContextMemory.builder().connection(connection)
                        .memoryId("copy-" + UUID.randomUUID()).build()) {
            memory.addMessages(List.of(before, big, after));
            List<String> expected = texts(List.of(before, big, after));
            assertEquals(expected, texts(memory.getMessages()));
            assertEquals(expected, texts(memory.getOriginalMemoryMsgs()));
            assertEquals(List.of(before.getTextContent(), after.getTextContent()),
                    texts(memory.getInteractionMsgs()).stream().filter(t -> t.length() < 100).toList());

            memory.saveTo(session, "s");
            copy.loadFrom(session, "s");
            assertEquals(expected, texts(copy.getMessages()));
            assertEquals(expected, texts(copy.getOriginalMemoryMsgs()));

            List<Msg> input = memory.prepareReasoningInput("你是助手");
            assertEquals(MsgRole.SYSTEM, input.get(0).getRole());
            assertTrue(input.get(0).getTextContent().startsWith("你是助手"));
            assertEquals(texts(memory.getMessages()), texts(input.subList(1, input.size())));
        }
    }

    @Test
    void largestMessageThroughRemoteMemoryAndIntoInMemoryMemory() {
        Msg big = sized(MAX_MESSAGE_BYTES, "最大");
        JsonSession session = new JsonSession(dir);
        try (RemoteMemory memory = RemoteMemory.builder().connection(connection)
                .memoryId("big-" + UUID.randomUUID()).build();
                RemoteMemory copy = RemoteMemory.builder().connection(connection)
                        .memoryId("copy-" + UUID.randomUUID()).build()) {
            memory.addMessage(big);
            memory.addMessage(Msg.builder().role(MsgRole.USER).textContent("small 小").build());
            memory.saveTo(session, "s");
            InMemoryMemory local = new InMemoryMemory();
            local.loadFrom(session, "s");
            assertEquals(texts(memory.getMessages()), texts(local.getMessages()));
            copy.loadFrom(session, "s");
            assertEquals(texts(local.getMessages()), texts(copy.getMessages()));
        }
    }

    /** Minutes on a busy machine: {@code mvn test -DexcludedGroups=slow} leaves it out. */
    @Test
    @Tag("slow")
    void hundredMegabytesOfHistory() {
        int mib = 1024 * 1024;
        JsonSession session = new JsonSession(dir);
        // A state stream is one call: 200 MB (working and original lists) needs more than the
        // default 30 s deadline on a busy machine.
        try (RemoteConnection slow = RemoteConnection.builder().target(server.target())
                        .deadline(Duration.ofMinutes(10)).build();
                RemoteAutoContextMemory memory = RemoteAutoContextMemory.builder().connection(slow)
                        .memoryId("h-" + UUID.randomUUID()).build();
                RemoteAutoContextMemory copy = RemoteAutoContextMemory.builder().connection(slow)
                        .memoryId("h2-" + UUID.randomUUID()).build()) {
            List<Msg> all = new ArrayList<>();
            for (int batch = 0; batch < 10; batch++) {
                List<Msg> msgs = new ArrayList<>();
                for (int i = 0; i < 10; i++) {
                    msgs.add(sized(mib, "第" + batch + "批" + i));
                }
                memory.addMessages(msgs);
                all.addAll(msgs);
            }
            List<Msg> original = memory.getOriginalMemoryMsgs();
            assertEquals(texts(all), texts(original));
            long bytes = original.stream().mapToLong(m -> MsgConverter.toProto(m).getSerializedSize()).sum();
            assertEquals(100L * mib, bytes);

            memory.saveTo(session, "h");
            copy.loadFrom(session, "h");
            assertEquals(texts(all), texts(copy.getMessages()));
            assertEquals(texts(all), texts(copy.getOriginalMemoryMsgs()));
        }
    }
}
