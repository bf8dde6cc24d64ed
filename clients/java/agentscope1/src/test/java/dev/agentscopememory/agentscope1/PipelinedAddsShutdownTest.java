package dev.agentscopememory.agentscope1;

import static dev.agentscopememory.agentscope1.SampleMessages.texts;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.grpc.Channel;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The server stops (SIGTERM, its graceful drain) while pipelined adds are still unanswered on the
 * watch stream: the drain ends the stream, the client sends the unanswered adds again as {@code
 * AddMessages} with their request ids once the server is back, and every add is stored exactly
 * once, in order.
 */
class PipelinedAddsShutdownTest {

    // Enough that the stop always finds some unanswered: a fast server answered 500 before it stopped.
    private static final int ADDS = 4000;

    private static Msg text(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    @Test
    void addsUnansweredWhenTheServerStopsAreStoredOnceInOrderAfterARestart() throws Exception {
        TestServer first = TestServer.start();
        TestServer second = null;
        ManagedChannel channel = Grpc.newChannelBuilder(first.target(), InsecureChannelCredentials.create()).build();
        AtomicInteger unaryAdds = new AtomicInteger();
        String id = "stopping-" + UUID.randomUUID();
        Channel counted = CountedCalls.on(channel, Map.of("AddMessages", unaryAdds));
        try (RemoteMemory memory = RemoteMemory.builder().channel(counted).memoryId(id)
                .coherentCache(true).pipelinedAdds(true).build()) {
            List<String> expected = new ArrayList<>(List.of("hello"));
            memory.addMessage(text("hello"));
            memory.flush();
            memory.getMessages();
            for (int i = 0; i < 1000 && !memory.servesFromCache(); i++) {
                Thread.sleep(10);
            }
            assertTrue(memory.servesFromCache(), "the watch is open");
            int unaryBefore = unaryAdds.get();
            for (int i = 0; i < ADDS; i++) {
                String t = "add " + i + " 消息";
                expected.add(t);
                memory.addMessage(text(t));
            }
            // Most adds are still unanswered: the drain ends the watch stream, the process exits.
            first.stop();
            String log = first.log();
            assertFalse(log.contains("ERROR") || log.contains("Traceback"), log);

            second = TestServer.restart(first);
            // The unanswered adds go again (AddMessages, same request ids) to the restarted server.
            memory.flush();
            assertTrue(unaryAdds.get() > unaryBefore, "the stop left adds unanswered, sent again as AddMessages");
            try (RemoteMemory plain = RemoteMemory.builder().target(second.target()).memoryId(id).build()) {
                assertEquals(expected, texts(plain.getMessages()));
            }
            assertEquals(expected, texts(memory.getMessages()));
            String restartedLog = second.log();
            assertFalse(restartedLog.contains("ERROR") || restartedLog.contains("Traceback"), restartedLog);
        } finally {
            channel.shutdownNow();
            if (second != null) {
                second.stop();
            }
            first.close(); // the restarted server shares its data directory
        }
    }
}
