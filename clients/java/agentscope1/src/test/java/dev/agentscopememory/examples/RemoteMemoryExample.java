package dev.agentscopememory.examples;

import dev.agentscopememory.agentscope1.RemoteMemory;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.model.Model;
import io.agentscope.core.model.OpenAIChatModel;
import io.agentscope.core.session.JsonSession;
import io.agentscope.core.tool.Toolkit;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A {@code ReActAgent} whose conversation lives in an agentscope-memory server: the example of
 * the README, as code the build compiles and a test runs.
 *
 * <pre>
 * make serve                                   # at the repository root
 * export OPENAI_API_KEY=...                    # any OpenAI-compatible endpoint
 * java -cp ... dev.agentscopememory.examples.RemoteMemoryExample "What did I ask you last time?"
 * </pre>
 */
public final class RemoteMemoryExample {

    private RemoteMemoryExample() {}

    /**
     * One turn of an agent on the remote memory {@code memoryId}; the agent's state is saved to a
     * JsonSession in {@code sessions} afterwards (the same files {@code InMemoryMemory} writes).
     */
    public static Msg chat(String target, String memoryId, Model model, Path sessions, String question) {
        try (RemoteMemory memory = RemoteMemory.builder()
                .target(target)
                .memoryId(memoryId)                   // any Unicode text, 1-256 bytes of UTF-8
                .deadline(Duration.ofSeconds(10))     // per call
                .apiKey(System.getenv("AGENTSCOPE_MEMORY_API_KEY")) // null: no key
                .build()) {                           // created on first use
            ReActAgent agent = ReActAgent.builder()
                    .name("Assistant")
                    .sysPrompt("You are a helpful assistant.")
                    .model(model)
                    .toolkit(new Toolkit())
                    .memory(memory)
                    .build();
            Msg reply = agent.call(Msg.builder().role(MsgRole.USER).name("user").textContent(question).build())
                    .block(Duration.ofMinutes(2));
            agent.saveTo(new JsonSession(sessions), memoryId);
            return reply;
        }
    }

    public static void main(String[] args) {
        Model model = OpenAIChatModel.builder()
                .baseUrl(env("OPENAI_BASE_URL", "https://api.openai.com/v1"))
                .apiKey(System.getenv("OPENAI_API_KEY"))
                .modelName(env("OPENAI_MODEL", "gpt-4o-mini"))
                .stream(false)
                .build();
        String question = args.length > 0 ? String.join(" ", args) : "Hello! Please remember that I like tea.";
        Msg reply = chat(env("AGENTSCOPE_MEMORY_TARGET", "127.0.0.1:50051"), "example.user-42", model,
                Path.of("sessions"), question);
        System.out.println(reply.getTextContent());
    }

    private static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }
}
