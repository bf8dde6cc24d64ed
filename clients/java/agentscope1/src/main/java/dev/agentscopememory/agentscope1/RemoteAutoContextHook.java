package dev.agentscopememory.agentscope1;

import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.Agent;
import io.agentscope.core.hook.Hook;
import io.agentscope.core.hook.HookEvent;
import io.agentscope.core.hook.PreCallEvent;
import io.agentscope.core.hook.PreReasoningEvent;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.tool.Toolkit;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The remote counterpart of AgentScope's {@code AutoContextHook}, for a {@code ReActAgent} whose
 * memory is a {@link RemoteAutoContextMemory}:
 *
 * <ul>
 *   <li>before the first call, registers the {@code context_reload} tool ({@link
 *       RemoteContextReloadTool}) in the agent's toolkit and attaches the agent's plan notebook;
 *   <li>before every reasoning step, lets the server compress if needed and replaces the model
 *       input with the system message (the agent's prompt plus the offload instruction) and the
 *       working messages.
 * </ul>
 *
 * <p>Agents with any other memory pass through untouched. Priority 0, like AgentScope's hook.
 */
public final class RemoteAutoContextHook implements Hook {

    private static final Logger log = LoggerFactory.getLogger(RemoteAutoContextHook.class);

    private final AtomicBoolean registered = new AtomicBoolean(false);

    @Override
    public int priority() {
        return 0;
    }

    @Override
    public <T extends HookEvent> Mono<T> onEvent(T event) {
        if (event instanceof PreCallEvent pre) {
            return onPreCall(pre).thenReturn(event);
        }
        if (event instanceof PreReasoningEvent pre) {
            return onPreReasoning(pre).thenReturn(event);
        }
        return Mono.just(event);
    }

    private static RemoteAutoContextMemory memoryOf(Agent agent) {
        if (agent instanceof ReActAgent react && react.getMemory() instanceof RemoteAutoContextMemory m) {
            return m;
        }
        return null;
    }

    private Mono<Void> onPreCall(PreCallEvent event) {
        RemoteAutoContextMemory memory = memoryOf(event.getAgent());
        if (memory == null || !registered.compareAndSet(false, true)) {
            return Mono.empty();
        }
        ReActAgent agent = (ReActAgent) event.getAgent();
        return Mono.fromRunnable(() -> {
                    try {
                        Toolkit toolkit = agent.getToolkit();
                        if (toolkit == null) {
                            log.warn("agent {} has no toolkit: the context_reload tool is not registered",
                                    agent.getName());
                        } else if (toolkit.getTool(RemoteContextReloadTool.TOOL_NAME) == null) {
                            toolkit.registerTool(new RemoteContextReloadTool(memory));
                            log.debug("context_reload registered for agent {} (memory {})", agent.getName(),
                                    memory.getMemoryId());
                        }
                        if (agent.getPlanNotebook() != null) {
                            memory.attachPlanNote(agent.getPlanNotebook());
                        }
                    } catch (RuntimeException e) {
                        // As AgentScope's AutoContextHook: logged, the call goes on, and the next
                        // call tries again.
                        log.error("registering the remote AutoContext integration failed for agent {}",
                                agent.getName(), e);
                        registered.set(false);
                    }
                })
                .subscribeOn(Schedulers.boundedElastic())
                .then();
    }

    private Mono<Void> onPreReasoning(PreReasoningEvent event) {
        RemoteAutoContextMemory memory = memoryOf(event.getAgent());
        if (memory == null) {
            return Mono.empty();
        }
        return Mono.fromRunnable(() -> {
                    List<Msg> input = event.getInputMessages();
                    Msg system = input != null && !input.isEmpty() && input.get(0).getRole() == MsgRole.SYSTEM
                            ? input.get(0) : null;
                    List<Msg> prepared = memory.prepareReasoningInput(system);
                    event.setInputMessages(prepared);
                })
                .subscribeOn(Schedulers.boundedElastic())
                .then();
    }
}
