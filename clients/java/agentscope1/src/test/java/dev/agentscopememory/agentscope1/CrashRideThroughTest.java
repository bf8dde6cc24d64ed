package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.tool.Tool;
import io.agentscope.core.tool.Toolkit;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * kill -9 of the server in the middle of a real ReActAgent conversation: the next turn rides out
 * the restart with no action by the user, and a tool call cut off by the crash is closed with
 * {@link AbstractRemoteMemory#closePendingToolCalls} so the agent goes on.
 */
class CrashRideThroughTest {

    static Msg user(String text) {
        return Msg.builder().role(MsgRole.USER).name("user").textContent(text).build();
    }

    static ReActAgent agent(RemoteMemory memory, ScriptedModel model, Object tools) {
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(tools);
        return ReActAgent.builder().name("Assistant").sysPrompt("You are a weather assistant.")
                .model(model).toolkit(toolkit).memory(memory).maxIters(6).build();
    }

    @Test
    void theNextTurnRidesOutAKillAndARestart() throws Exception {
        TestServer first = TestServer.start();
        TestServer[] second = new TestServer[1];
        try (RemoteMemory memory = RemoteMemory.builder().target(first.target()).memoryId("ride-through")
                .deadline(Duration.ofSeconds(60)).build()) {
            ScriptedModel model = new ScriptedModel(AgentScripts.weatherTurns());
            ReActAgent agent = agent(memory, model, new WeatherTools());
            agent.call(user("Weather in Paris and Berlin? Also 19+23.")).block(Duration.ofSeconds(60));
            assertEquals(7, memory.getMessages().size());

            first.kill();
            long killed = System.nanoTime();
            // The operator restarts the server at once; the user just asks the next question.
            long[] backAt = new long[1];
            CompletableFuture<Void> restarted = CompletableFuture.runAsync(() -> {
                try {
                    second[0] = TestServer.restart(first);
                    backAt[0] = System.nanoTime();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            Msg reply = agent.call(user("And Rome?")).block(Duration.ofSeconds(90));
            long done = System.nanoTime();
            restarted.get(60, TimeUnit.SECONDS);
            assertEquals("I do not know Rome's weather.", reply.getTextContent());
            List<Msg> stored = memory.getMessages();
            assertEquals(11, stored.size());
            assertEquals("And Rome?", stored.get(7).getTextContent());
            System.out.printf("ride-through: next ReActAgent turn done %d ms after kill -9; the restarted server"
                    + " was up %d ms after the kill, the turn %d ms after that%n",
                    TimeUnit.NANOSECONDS.toMillis(done - killed), TimeUnit.NANOSECONDS.toMillis(backAt[0] - killed),
                    TimeUnit.NANOSECONDS.toMillis(done - backAt[0]));
        } finally {
            if (second[0] != null) {
                second[0].stop();
            }
            first.close();
        }
    }

    /** A tool during which the memory server crashes. */
    public static class CrashingTools {
        private final TestServer server;

        CrashingTools(TestServer server) {
            this.server = server;
        }

        @Tool(name = "book_table", description = "Books a table")
        public String bookTable() throws InterruptedException {
            server.kill();
            return "booked";
        }
    }

    @Test
    void aToolCallCutOffByACrashIsClosedAndTheAgentGoesOn() throws Exception {
        TestServer first = TestServer.start();
        TestServer second = null;
        try (RemoteMemory memory = RemoteMemory.builder().target(first.target()).memoryId("cut-off")
                .deadline(Duration.ofSeconds(3)).build()) {
            // The reply twice: with the default AddConfirmation.MODEL_OUTPUT, the tool's result goes
            // ahead without waiting, so the agent may reason once more (taking a reply) before the
            // failure to store it surfaces, at the reply's add.
            List<ContentBlock> interrupted =
                    List.of(TextBlock.builder().text("The booking was interrupted; shall I try again?").build());
            List<List<ContentBlock>> script = List.of(
                    List.of(new ToolUseBlock("call_book", "book_table", Map.of(), "{}", Map.of())),
                    interrupted, interrupted);
            ScriptedModel model = new ScriptedModel(script);
            ReActAgent agent = agent(memory, model, new CrashingTools(first));
            // The server dies while the tool runs: its result cannot be stored and the turn fails.
            assertThrows(RuntimeException.class, () -> agent.call(user("Book a table")).block(Duration.ofSeconds(60)));

            second = TestServer.restart(first);
            // AgentScope refuses to go on while the tool call has no result...
            RuntimeException refused = assertThrows(RuntimeException.class,
                    () -> agent.call(user("Any news?")).block(Duration.ofSeconds(60)));
            assertTrue(String.valueOf(refused.getMessage()).toLowerCase().contains("pending"), refused.toString());

            // ...until the cut-off call is closed with an error result.
            List<Msg> added = memory.closePendingToolCalls("Assistant");
            assertEquals(1, added.size());
            assertEquals(List.of(), memory.closePendingToolCalls("Assistant"));
            Msg reply = agent.call(user("Any news?")).block(Duration.ofSeconds(60));
            assertEquals("The booking was interrupted; shall I try again?", reply.getTextContent());

            List<Msg> seen = model.calls().get(model.calls().size() - 1);
            Msg closing = seen.stream().filter(m -> m.getRole() == MsgRole.TOOL).findFirst().orElseThrow();
            ToolResultBlock result = closing.getContentBlocks(ToolResultBlock.class).get(0);
            assertEquals("call_book", result.getId());
            assertEquals("Assistant", closing.getName());
            assertEquals(String.format(PendingToolCalls.INTERRUPTED, "book_table"),
                    ((TextBlock) result.getOutput().get(0)).getText());
        } finally {
            if (second != null) {
                second.stop();
            }
            first.close();
        }
    }
}
