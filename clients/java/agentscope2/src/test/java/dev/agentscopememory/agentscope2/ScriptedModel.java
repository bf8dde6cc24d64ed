package dev.agentscopememory.agentscope2;

import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.model.ChatResponse;
import io.agentscope.core.model.ChatUsage;
import io.agentscope.core.model.GenerateOptions;
import io.agentscope.core.model.Model;
import io.agentscope.core.model.ToolSchema;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import reactor.core.publisher.Flux;

/**
 * An AgentScope-Java 2.x {@link Model} that answers each call with the next scripted response
 * and records the messages and tool schemas it was given. Response ids are {@code <prefix>-<step>}.
 */
class ScriptedModel implements Model {

    private final List<List<ContentBlock>> script;
    private final String prefix;
    private final List<List<Msg>> calls = Collections.synchronizedList(new ArrayList<>());
    private final List<List<ToolSchema>> offered = Collections.synchronizedList(new ArrayList<>());
    private final Object lock = new Object();
    private int next;

    ScriptedModel(List<List<ContentBlock>> script) {
        this(script, "resp");
    }

    ScriptedModel(List<List<ContentBlock>> script, String prefix) {
        this.script = script;
        this.prefix = prefix;
    }

    @Override
    public Flux<ChatResponse> stream(List<Msg> messages, List<ToolSchema> tools, GenerateOptions options) {
        int step;
        synchronized (lock) {
            calls.add(new ArrayList<>(messages));
            offered.add(tools == null ? List.of() : new ArrayList<>(tools));
            if (next >= script.size()) {
                return Flux.error(new IllegalStateException("the script has only " + script.size() + " responses"));
            }
            step = next++;
        }
        return Flux.just(ChatResponse.builder()
                .id(prefix + "-" + step)
                .content(script.get(step))
                .usage(new ChatUsage(100 + step, 10 + step, 0.5))
                .build());
    }

    @Override
    public String getModelName() {
        return "scripted";
    }

    List<List<Msg>> calls() {
        return calls;
    }

    /** The tool schemas the model was offered, one list per call. */
    List<List<ToolSchema>> tools() {
        return offered;
    }

    int used() {
        synchronized (lock) {
            return next;
        }
    }
}
