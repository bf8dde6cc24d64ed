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
import java.util.function.Function;
import reactor.core.publisher.Flux;

/**
 * An AgentScope-Java 2.x {@link Model} that answers each call with the next scripted response
 * and records the messages and tool schemas it was given. Response ids are {@code <prefix>-<step>}.
 */
class ScriptedModel implements Model {

    private final List<Function<List<Msg>, List<ContentBlock>>> script;
    private final String prefix;
    private final List<List<Msg>> calls = Collections.synchronizedList(new ArrayList<>());
    private final List<List<ToolSchema>> offered = Collections.synchronizedList(new ArrayList<>());
    private final Object lock = new Object();
    private int next;

    ScriptedModel(List<List<ContentBlock>> script) {
        this(script, "resp");
    }

    ScriptedModel(List<List<ContentBlock>> script, String prefix) {
        this(prefix, script.stream().<Function<List<Msg>, List<ContentBlock>>>map(r -> in -> r).toList());
    }

    /** Each response computed from the messages of its call (e.g. a tool call naming what they hold). */
    private ScriptedModel(String prefix, List<Function<List<Msg>, List<ContentBlock>>> script) {
        this.script = script;
        this.prefix = prefix;
    }

    static ScriptedModel answering(List<Function<List<Msg>, List<ContentBlock>>> script) {
        return answering("resp", script);
    }

    static ScriptedModel answering(String prefix, List<Function<List<Msg>, List<ContentBlock>>> script) {
        return new ScriptedModel(prefix, script);
    }

    @Override
    public Flux<ChatResponse> stream(List<Msg> messages, List<ToolSchema> tools, GenerateOptions options) {
        int step;
        List<ContentBlock> response;
        synchronized (lock) {
            calls.add(new ArrayList<>(messages));
            offered.add(tools == null ? List.of() : new ArrayList<>(tools));
            if (next >= script.size()) {
                return Flux.error(new IllegalStateException("the script has only " + script.size() + " responses"));
            }
            step = next++;
            response = script.get(step).apply(messages);
        }
        return Flux.just(ChatResponse.builder()
                .id(prefix + "-" + step)
                .content(response)
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
