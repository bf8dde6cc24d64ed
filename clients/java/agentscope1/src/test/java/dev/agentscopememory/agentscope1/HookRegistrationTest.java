package dev.agentscopememory.agentscope1;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.agentscopememory.client.TestServer;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.tool.Toolkit;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A failing registration of the remote AutoContext integration is logged and the agent's call goes
 * on, as with AgentScope's own AutoContextHook; the next call tries again.
 */
class HookRegistrationTest {

    /** A toolkit that refuses the context_reload tool. */
    static final class RefusingToolkit extends Toolkit {
        final AtomicInteger refused = new AtomicInteger();

        /** ReActAgent works on a copy of its toolkit; this one stays itself. */
        @Override
        public Toolkit copy() {
            return this;
        }

        @Override
        public void registerTool(Object tool) {
            if (tool instanceof RemoteContextReloadTool) {
                refused.incrementAndGet();
                throw new IllegalStateException("no room for " + RemoteContextReloadTool.TOOL_NAME);
            }
            super.registerTool(tool);
        }
    }

    @Test
    void aFailedRegistrationIsLoggedAndTheCallGoesOn() throws Exception {
        TestServer server = TestServer.shared();
        List<List<ContentBlock>> script = List.of(
                List.of(TextBlock.builder().text("first answer").build()),
                List.of(TextBlock.builder().text("second answer").build()));
        RefusingToolkit toolkit = new RefusingToolkit();
        try (RemoteAutoContextMemory memory = RemoteAutoContextMemory.builder().target(server.target())
                .memoryId("hook-" + UUID.randomUUID()).build()) {
            ReActAgent agent = ReActAgent.builder().name("Assistant").sysPrompt("sys")
                    .model(new ScriptedModel(script)).toolkit(toolkit).memory(memory)
                    .hook(new RemoteAutoContextHook()).maxIters(3).build();
            Msg first = agent.call(Msg.builder().role(MsgRole.USER).name("user").textContent("hi").build())
                    .block(Duration.ofSeconds(60));
            assertEquals("first answer", first.getTextContent());
            Msg second = agent.call(Msg.builder().role(MsgRole.USER).name("user").textContent("again").build())
                    .block(Duration.ofSeconds(60));
            assertEquals("second answer", second.getTextContent());
            assertEquals(2, toolkit.refused.get()); // tried again at the second call
        }
    }
}
