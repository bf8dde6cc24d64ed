package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.TestServer;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The server going away and coming back: clear errors meanwhile, nothing lost, same client. */
class ServerRestartTest {

    static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).textContent(text).build();
    }

    @Test
    void memorySurvivesAKillAndTheClientRecovers() throws Exception {
        TestServer first = TestServer.start();
        TestServer second = null;
        try (RemoteMemory memory = RemoteMemory.builder().target(first.target()).memoryId("restart-1")
                .maxAttempts(1).deadline(Duration.ofSeconds(10)).build()) {
            memory.addMessage(user("before"));
            memory.addMessage(user("crash"));
            first.kill();

            RemoteMemoryException down = assertThrows(RemoteMemoryException.class, memory::getMessages);
            assertInstanceOf(RemoteMemoryException.Unavailable.class, down);

            second = TestServer.restart(first);
            // The same client object reconnects by itself once the server is back.
            List<String> texts = null;
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (texts == null) {
                try {
                    texts = memory.getMessages().stream().map(Msg::getTextContent).toList();
                } catch (RemoteMemoryException.Unavailable e) {
                    if (System.nanoTime() > until) {
                        throw e;
                    }
                    Thread.sleep(100);
                }
            }
            assertEquals(List.of("before", "crash"), texts);
        } finally {
            if (second != null) {
                second.stop();
            }
            first.close(); // the restarted server shares its data directory
        }
    }

    @Test
    void retriesCarryAnAddAcrossARestart() throws Exception {
        TestServer first = TestServer.start();
        TestServer[] second = new TestServer[1];
        try (RemoteMemory memory = RemoteMemory.builder().target(first.target()).memoryId("restart-2")
                .deadline(Duration.ofSeconds(60)).build()) { // retried until the deadline (the default)
            memory.addMessage(user("one"));
            first.stop();
            CompletableFuture<Void> restarted = CompletableFuture.runAsync(() -> {
                try {
                    Thread.sleep(500);
                    second[0] = TestServer.restart(first);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            memory.addMessage(user("two")); // retried with its request id until the server is back
            restarted.get(60, TimeUnit.SECONDS);
            assertEquals(List.of("one", "two"), memory.getMessages().stream().map(Msg::getTextContent).toList());
        } finally {
            if (second[0] != null) {
                second[0].stop();
            }
            first.close();
        }
    }
}
