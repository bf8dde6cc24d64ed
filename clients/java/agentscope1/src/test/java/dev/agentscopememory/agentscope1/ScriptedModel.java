package dev.agentscopememory.agentscope1;

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
 * A test implementation of AgentScope's {@link Model}: answers each call with the next scripted
 * response and records the messages and tools it was given.
 */
class ScriptedModel implements Model {

    private final List<List<ContentBlock>> script;
    private final List<List<Msg>> calls = Collections.synchronizedList(new ArrayList<>());
    private final List<List<String>> toolNames = Collections.synchronizedList(new ArrayList<>());
    /** Calls may come from several Reactor threads; each takes the next step exactly once. */
    private final Object lock = new Object();
    private int next;

    ScriptedModel(List<List<ContentBlock>> script) {
        this.script = script;
    }

    @Override
    public Flux<ChatResponse> stream(List<Msg> messages, List<ToolSchema> tools, GenerateOptions options) {
        List<String> names = new ArrayList<>();
        if (tools != null) {
            for (ToolSchema t : tools) {
                names.add(t.getName());
            }
        }
        int step;
        synchronized (lock) {
            calls.add(new ArrayList<>(messages));
            toolNames.add(names);
            if (next >= script.size()) {
                return Flux.error(new IllegalStateException("the script has only " + script.size() + " responses"));
            }
            step = next++;
        }
        ChatResponse response = ChatResponse.builder()
                .id("resp-" + step)
                .content(script.get(step))
                .usage(new ChatUsage(100 + step, 10 + step, 0.5))
                .build();
        return Flux.just(response);
    }

    @Override
    public String getModelName() {
        return "scripted";
    }

    /** The messages the model was given, one list per call. */
    List<List<Msg>> calls() {
        return calls;
    }

    /** The tool names offered on each call. */
    List<List<String>> toolNames() {
        return toolNames;
    }

    int used() {
        synchronized (lock) {
            return next;
        }
    }
}
