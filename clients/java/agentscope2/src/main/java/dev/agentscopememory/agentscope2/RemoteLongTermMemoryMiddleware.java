package dev.agentscopememory.agentscope2;

import dev.agentscopememory.client.Ids;
import dev.agentscopememory.client.LongTermOptions;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.internal.LongTermCalls;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.agent.Agent;
import io.agentscope.core.agent.AgentBase;
import io.agentscope.core.agent.RuntimeContext;
import io.agentscope.core.event.AgentEvent;
import io.agentscope.core.event.AgentResultEvent;
import io.agentscope.core.memory.LongTermMemory;
import io.agentscope.core.memory.LongTermMemoryTools;
import io.agentscope.core.memory.StaticLongTermMemoryHook;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.middleware.AgentInput;
import io.agentscope.core.middleware.MiddlewareBase;
import io.agentscope.core.state.AgentState;
import io.agentscope.core.tool.AgentTool;
import io.agentscope.core.tool.Tool;
import io.agentscope.core.tool.ToolParam;
import io.agentscope.core.tool.Toolkit;
import io.agentscope.core.tool.ToolkitAware;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.WeakHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Long-term memory for an AgentScope-Java 2.x agent, per call, in AgentScope's three modes ({@link
 * Builder#mode}): the 2.x replacement for {@code longTermMemory(...).longTermMemoryMode(...)}, whose
 * memory has one scope for every user and whose static hook in 2.0.0 records the default session's
 * conversation (it reads {@code agent.getAgentState()}) whatever user and session the call's
 * {@link RuntimeContext} names.
 *
 * <p>Every call has its own scope: the user id of the call's {@code RuntimeContext}, the agent name
 * given to the builder or else the agent's own, and, when the builder says {@link
 * Builder#sessionAsRunName}, the context's session id as run name.
 *
 * <p>{@link Mode#STATIC_CONTROL} (the default), around each agent call ({@link #onAgent}):
 * <ol>
 *   <li>retrieves the memories relevant to the last user message of the call's input and, when
 *       any are found, appends them to the input as AgentScope's static hook does: one {@code
 *       USER} message named {@value #MEMORY_MSG_NAME} holding {@code
 *       LongTermMemoryTools.wrap(memories)};</li>
 *   <li>after the call, records what the call added to the context of its own slot (its input,
 *       the agent's steps and reply, as text) and never the injected memory message.</li>
 * </ol>
 * As AgentScope's hook does, a failing server is logged (at WARN) and the call goes on without
 * memories (or without recording); {@link Builder#failOnError} makes the failure the call's
 * instead. By default the call's {@code Flux} completes only after the record; {@link
 * Builder#asyncRecord} lets it complete first, as AgentScope's {@code
 * longTermMemoryAsyncRecord(true)} does, and {@link #close} then waits (bounded) for the records
 * still in flight.
 *
 * <p>{@link Mode#AGENT_CONTROL} gives the model AgentScope's own {@code recordToMemory} and {@code
 * retrieveFromMemory} tools instead (same names, descriptions, parameters and result texts as
 * {@code LongTermMemoryTools}, which does the work), each acting in the scope of the call that runs
 * it; nothing is retrieved or recorded around the call. {@link Mode#BOTH} does both. The tools
 * reach the agent through 2.0.0's {@link ToolkitAware}: {@code ReActAgent.builder().middleware(m)
 * .build()} hands each middleware that implements it the agent's own toolkit, and this one
 * registers its two tools there. So the tools need no wiring of their own and sit in the agent's
 * toolkit like any other (schemas offered to the model, calls run by the toolkit, which passes
 * them the call's {@code RuntimeContext}); a middleware's {@code onReasoning} could add schemas
 * but would have to run the calls itself in {@code onActing}, around the agent's toolkit. As
 * AgentScope's tools do, they never fail the call: a failure is the tool result's text ({@code
 * "Error recording memory: ..."}), whatever {@code failOnError} says.
 *
 * <p>An agent has one set of long-term memory tools. A toolkit keeps one tool per name and a
 * later registration silently replaces an earlier one, so with the deprecated {@code
 * ReActAgent.builder().longTermMemory(ltm).longTermMemoryMode(AGENT_CONTROL or BOTH)} beside this
 * middleware in {@code AGENT_CONTROL} or {@code BOTH}, 2.0.0 would offer the model AgentScope's
 * {@code LongTermMemoryTools} on {@code ltm} (registered after the middlewares) and every call
 * would record to and retrieve from that memory's one fixed scope, not the caller's. This
 * middleware refuses that instead of guessing which was meant: tools of these names already on the
 * toolkit make the agent's {@code build()} fail (an {@code IllegalStateException} saying so), and
 * tools registered after it under its names make each agent call fail before anything runs. Use
 * the middleware in place of the builder's long-term memory, or give the middleware {@link
 * Mode#STATIC_CONTROL}.
 *
 * <p>Likewise one static retrieve and record per call: the builder's {@code longTermMemory(...)}
 * in {@code STATIC_CONTROL} or {@code BOTH} (AgentScope's default) adds AgentScope's {@code
 * StaticLongTermMemoryHook}, which beside this middleware in {@link Mode#STATIC_CONTROL} or {@link
 * Mode#BOTH} would retrieve and record each call a second time (in its fixed scope, from the
 * default session). Each call of such an agent fails before anything runs (an {@code
 * IllegalStateException} saying to keep the middleware and drop {@code longTermMemory(...)}): at
 * the call, as 2.0.0's {@code build()} adds that hook only after handing the middlewares the
 * toolkit.
 *
 * <pre>{@code
 * RemoteLongTermMemoryMiddleware ltm = RemoteLongTermMemoryMiddleware.builder()
 *         .target("127.0.0.1:50051").mode(RemoteLongTermMemoryMiddleware.Mode.BOTH).build();
 * ReActAgent agent = ReActAgent.builder().name("Assistant").model(model).stateStore(store)
 *         .middleware(ltm).build();
 * agent.call(List.of(msg), RuntimeContext.builder().userId("张三").sessionId("s1").build()).block();
 * }</pre>
 */
public final class RemoteLongTermMemoryMiddleware implements MiddlewareBase, ToolkitAware, AutoCloseable {

    /**
     * Who uses the long-term memory, as AgentScope's {@code LongTermMemoryMode} (same constants;
     * that enum is deprecated for removal in 2.0.0, so this class does not take it).
     */
    public enum Mode {
        /** The model, through the {@code recordToMemory} and {@code retrieveFromMemory} tools. */
        AGENT_CONTROL,
        /** This middleware, before and after each call: retrieve and inject, then record. */
        STATIC_CONTROL,
        /** Both. */
        BOTH
    }

    /** The name of the injected memory message, as AgentScope's {@code StaticLongTermMemoryHook} names it. */
    public static final String MEMORY_MSG_NAME = "long_term_memory";

    private static final Logger log = LoggerFactory.getLogger(RemoteLongTermMemoryMiddleware.class);

    /** The names of the tools of {@link Mode#AGENT_CONTROL}, AgentScope's {@code LongTermMemoryTools}' own. */
    private static final List<String> TOOL_NAMES = List.of("recordToMemory", "retrieveFromMemory");

    private final LongTermCalls calls;
    private final String agentName;
    private final boolean sessionAsRunName;
    private final boolean failOnError;
    private final Mode mode;
    private final boolean asyncRecord;
    private final Duration closeWait;

    /**
     * The tools this middleware registered, by the toolkit they went to (one per agent built with
     * it; weak, so an agent dropped takes its entry along), in {@link #TOOL_NAMES} order: each
     * call checks its agent's toolkit still holds these very tools.
     */
    private final Map<Toolkit, List<AgentTool>> registered = Collections.synchronizedMap(new WeakHashMap<>());

    /** Guards {@link #inFlight}; close() waits on it. */
    private final Object inFlightLock = new Object();
    /** Asynchronous records subscribed and not yet ended. */
    private int inFlight;

    private RemoteLongTermMemoryMiddleware(Builder b) {
        agentName = b.agentName;
        sessionAsRunName = b.sessionAsRunName;
        failOnError = b.failOnError;
        mode = b.mode;
        asyncRecord = b.asyncRecord;
        closeWait = b.closeWait;
        calls = new LongTermCalls(b, RemoteLongTermMemory.metadataJson(b), b.limitValue());
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * In {@link Mode#AGENT_CONTROL} and {@link Mode#BOTH}, registers the per-call {@code
     * recordToMemory} and {@code retrieveFromMemory} tools on the toolkit of the agent being built
     * (2.0.0's {@code ReActAgent.Builder.build()} calls this); in {@link Mode#STATIC_CONTROL},
     * nothing.
     *
     * @throws IllegalStateException when the toolkit already has a tool of either name (AgentScope's
     *     {@code LongTermMemoryTools}, or another such middleware's): the toolkit would silently
     *     replace it, and the agent must have one set of memory tools
     */
    @Override
    public void rebindToolkit(Toolkit toolkit) {
        if (mode == Mode.STATIC_CONTROL || toolkit == null) {
            return;
        }
        List<String> taken = TOOL_NAMES.stream().filter(name -> toolkit.getTool(name) != null).toList();
        if (!taken.isEmpty()) {
            throw new IllegalStateException("RemoteLongTermMemoryMiddleware in " + mode + " registers the tools "
                    + TOOL_NAMES + ", but the agent's toolkit already has " + taken + " (AgentScope's"
                    + " LongTermMemoryTools, or another long-term memory middleware's), which it would silently"
                    + " replace: give the agent one set of long-term memory tools, either those or this"
                    + " middleware's (or give this middleware Mode.STATIC_CONTROL)");
        }
        toolkit.registerTool(new PerCallTools(this));
        registered.put(toolkit, TOOL_NAMES.stream().map(toolkit::getTool).toList());
    }

    /**
     * Why this call must not run: the agent's toolkit no longer holds the tools this middleware
     * registered on it under their names, because something registered after the middlewares
     * replaced them (in 2.0.0, the builder's deprecated {@code longTermMemory(...)} in {@code
     * AGENT_CONTROL} or {@code BOTH}); null when it does, or when the agent is not one this
     * middleware registered tools for.
     */
    private IllegalStateException replacedTools(Agent agent) {
        if (mode == Mode.STATIC_CONTROL || !(agent instanceof ReActAgent react)) {
            return null;
        }
        Toolkit toolkit = react.getToolkit();
        List<AgentTool> ours = toolkit == null ? null : registered.get(toolkit);
        if (ours == null) {
            return null;
        }
        for (int i = 0; i < TOOL_NAMES.size(); i++) {
            if (toolkit.getTool(TOOL_NAMES.get(i)) != ours.get(i)) {
                return new IllegalStateException("Agent '" + agent.getName() + "': its " + TOOL_NAMES.get(i)
                        + " tool is no longer RemoteLongTermMemoryMiddleware's (mode " + mode + "): a tool of the"
                        + " same name registered after it replaced it, as ReActAgent.builder().longTermMemory(...)"
                        + " with longTermMemoryMode AGENT_CONTROL or BOTH does, so the model's memory calls would"
                        + " reach that one memory's fixed scope instead of each call's. Give the agent one of"
                        + " the two: drop longTermMemory(...) from its builder (this middleware replaces it)"
                        // With the builder's static hook too, STATIC_CONTROL here would retrieve and record twice.
                        + (hasStaticHook(agent) ? ", as its longTermMemoryMode also adds AgentScope's"
                                + " StaticLongTermMemoryHook beside this middleware"
                                : ", or give this middleware Mode.STATIC_CONTROL"));
            }
        }
        return null;
    }

    /**
     * Why this call must not run: in {@link Mode#STATIC_CONTROL} or {@link Mode#BOTH}, the agent
     * also has AgentScope's {@code StaticLongTermMemoryHook} (in 2.0.0, what the builder's
     * deprecated {@code longTermMemory(...)} adds in {@code STATIC_CONTROL} or {@code BOTH}, its
     * default), so each call would retrieve and inject twice and record twice; null otherwise.
     * Checked at each call, not when the agent is built: 2.0.0's {@code build()} hands the
     * middlewares the toolkit ({@link #rebindToolkit}) before it adds that hook, and tells them
     * nothing after. The hook runs inside the call this middleware wraps, so nothing has run yet.
     */
    private IllegalStateException staticHookBeside(Agent agent) {
        if (mode == Mode.AGENT_CONTROL || !hasStaticHook(agent)) {
            return null;
        }
        return new IllegalStateException("Agent '" + agent.getName() + "' has AgentScope's StaticLongTermMemoryHook,"
                + " which ReActAgent.builder().longTermMemory(...) adds with longTermMemoryMode STATIC_CONTROL or"
                + " BOTH (its default), beside RemoteLongTermMemoryMiddleware in " + mode + ": every call would"
                + " retrieve and record twice, the hook's in its memory's one fixed scope and from the default"
                + " session's context whatever the call's. Keep the middleware: drop longTermMemory(...) from the"
                + " agent's builder (give this middleware Mode.BOTH if the model should have the memory tools"
                + " too)");
    }

    /** Whether the agent has AgentScope's {@code StaticLongTermMemoryHook} among its hooks. */
    @SuppressWarnings("removal")
    private static boolean hasStaticHook(Agent agent) {
        return agent instanceof AgentBase base && base.getHooks() != null
                && base.getHooks().stream().anyMatch(h -> h instanceof StaticLongTermMemoryHook);
    }

    /**
     * In {@link Mode#STATIC_CONTROL} and {@link Mode#BOTH}, retrieves and injects before the
     * call, records what the call added after it; in {@link Mode#AGENT_CONTROL} the call runs as
     * given.
     */
    @Override
    public Flux<AgentEvent> onAgent(Agent agent, RuntimeContext ctx, AgentInput input,
            Function<AgentInput, Flux<AgentEvent>> next) {
        IllegalStateException replaced = replacedTools(agent);
        if (replaced != null) {
            return Flux.error(replaced);
        }
        IllegalStateException twice = staticHookBeside(agent);
        if (twice != null) {
            return Flux.error(twice);
        }
        if (mode == Mode.AGENT_CONTROL) {
            return next.apply(input);
        }
        return Flux.defer(() -> {
            List<Msg> msgs = input.msgs() == null ? List.of() : input.msgs();
            RemoteLongTermMemory ltm;
            try {
                ltm = memoryOf(agent, ctx);
            } catch (IllegalArgumentException e) {
                // A user id the server would refuse: no memory for this call.
                return failOnError ? Flux.error(e) : logged("use long-term memory", e, next.apply(input));
            }
            return retrieve(ltm, msgs).flatMapMany(memory -> {
                List<Msg> given = new ArrayList<>(msgs);
                memory.ifPresent(given::add);
                AtomicReference<Msg> reply = new AtomicReference<>();
                return next.apply(new AgentInput(given))
                        .doOnNext(e -> {
                            if (e instanceof AgentResultEvent r) {
                                reply.set(r.getResult());
                            }
                        })
                        // What to record is read from the slot when the call ends, in both modes.
                        .concatWith(Mono.defer(() -> {
                            List<Msg> added = added(agent, ctx, msgs, memory, reply.get());
                            return asyncRecord ? recordAsync(ltm, added) : record(ltm, added);
                        }).then(Mono.empty()));
            });
        });
    }

    /**
     * AgentScope's own {@code LongTermMemoryTools} on the memory of one call's scope, so the
     * tools' checks and result texts are AgentScope's (a scope the server would refuse is the
     * tool's error text, as a failing memory is).
     */
    @SuppressWarnings("removal")
    private LongTermMemoryTools toolsOf(Agent agent, RuntimeContext ctx) {
        try {
            return new LongTermMemoryTools(memoryOf(agent, ctx));
        } catch (IllegalArgumentException e) {
            return new LongTermMemoryTools(new FailingMemory(e));
        }
    }

    /**
     * The memory of this call's scope (the agent name alone when the context names no user), on
     * this middleware's connection.
     *
     * @throws IllegalArgumentException when the scope breaks the server's id rules
     */
    private RemoteLongTermMemory memoryOf(Agent agent, RuntimeContext ctx) {
        String user = ctx == null ? null : ctx.getUserId();
        String run = sessionAsRunName && ctx != null ? ctx.getSessionId() : null;
        String name = agentName != null ? agentName : agent.getName();
        return new RemoteLongTermMemory(calls, LongTermCalls.scope(name, user, run));
    }

    @SuppressWarnings("deprecation")
    private Mono<Optional<Msg>> retrieve(RemoteLongTermMemory ltm, List<Msg> msgs) {
        Msg query = null;
        for (int i = msgs.size() - 1; i >= 0 && query == null; i--) {
            if (msgs.get(i) != null && msgs.get(i).getRole() == MsgRole.USER) {
                query = msgs.get(i);
            }
        }
        // No user message, or one without text: "" and no call.
        return ltm.retrieve(query)
                .filter(text -> !text.isEmpty())
                .map(text -> Optional.of(Msg.builder().role(MsgRole.USER).name(MEMORY_MSG_NAME)
                        .content(TextBlock.builder().text(LongTermMemoryTools.wrap(text)).build()).build()))
                .defaultIfEmpty(Optional.empty())
                .onErrorResume(e -> failOnError ? Mono.error(e)
                        : logged("retrieve from long-term memory", e, Mono.just(Optional.<Msg>empty())));
    }

    /**
     * What this call added to the context of its slot, without the injected memory message: from
     * the call's first input message on. When the context no longer holds it (compacted during the
     * call, or an empty input), the input and the reply.
     */
    private static List<Msg> added(Agent agent, RuntimeContext ctx, List<Msg> input, Optional<Msg> memory, Msg reply) {
        String memoryId = memory.map(Msg::getId).orElse(null);
        AgentState state = RuntimeContext.resolveAgentState(ctx, agent);
        List<Msg> context = state == null ? List.of() : state.getContext();
        int start = -1;
        String firstId = input.isEmpty() || input.get(0) == null ? null : input.get(0).getId();
        for (int i = context.size() - 1; i >= 0 && firstId != null; i--) {
            if (firstId.equals(context.get(i).getId())) {
                start = i;
                break;
            }
        }
        List<Msg> out = new ArrayList<>();
        List<Msg> source = start >= 0 ? context.subList(start, context.size()) : input;
        for (Msg m : source) {
            if (m != null && (memoryId == null || !memoryId.equals(m.getId()))) {
                out.add(m);
            }
        }
        if (start < 0 && reply != null) {
            out.add(reply);
        }
        return out;
    }

    private Mono<Void> record(RemoteLongTermMemory ltm, List<Msg> msgs) {
        return ltm.record(msgs)
                .onErrorResume(e -> failOnError ? Mono.error(e)
                        : logged("record to long-term memory", e, Mono.<Void>empty()));
    }

    /**
     * Starts the record and returns at once, as 2.0.0's {@code StaticLongTermMemoryHook} does with
     * {@code async}: subscribed apart from the call (on Reactor's bounded-elastic scheduler, where
     * {@link LongTermCalls#record} runs already, rather than the hook's own scheduler of one thread
     * and three queued tasks), with the call's Reactor context, a failure logged at WARN as the
     * hook logs it whatever {@code failOnError} says (the call has ended). Counted in flight until
     * it ends, so {@link #close} can wait for it.
     */
    private Mono<Void> recordAsync(RemoteLongTermMemory ltm, List<Msg> msgs) {
        if (msgs.isEmpty()) {
            return Mono.empty();
        }
        return Mono.deferContextual(callContext -> {
            synchronized (inFlightLock) {
                inFlight++;
            }
            ltm.record(msgs)
                    .contextWrite(c -> c.putAll(callContext))
                    .onErrorResume(e -> logged("asynchronously record to long-term memory", e, Mono.<Void>empty()))
                    .doFinally(signal -> {
                        synchronized (inFlightLock) {
                            inFlight--;
                            inFlightLock.notifyAll();
                        }
                    })
                    .subscribe();
            return Mono.empty();
        });
    }

    /**
     * The tools AgentScope's {@code LongTermMemoryTools} offers, with its names, descriptions and
     * parameters (a test compares the schemas), run in the scope of the call that runs them: the
     * toolkit passes each call's {@code Agent} and {@code RuntimeContext} (parameters without
     * {@code @ToolParam} are not in the schema).
     */
    static final class PerCallTools {
        private final RemoteLongTermMemoryMiddleware owner;

        PerCallTools(RemoteLongTermMemoryMiddleware owner) {
            this.owner = owner;
        }

        @Tool(description = "Record important information to long-term memory for future reference. Use this when"
                + " the user shares preferences, personal information, or important facts that should be"
                + " remembered across conversations.")
        public Mono<String> recordToMemory(
                @ToolParam(name = "thinking", description = "Your reasoning about what to record and why")
                        String thinking,
                @ToolParam(name = "content",
                        description = "List of specific facts to remember. Each item should be clear and concise.")
                        List<String> content,
                Agent agent, RuntimeContext ctx) {
            return owner.toolsOf(agent, ctx).recordToMemory(thinking, content);
        }

        @Tool(description = "Retrieve information from long-term memory based on keywords. Use this to recall user"
                + " preferences, past conversations, or important facts.")
        public Mono<String> retrieveFromMemory(
                @ToolParam(name = "keywords",
                        description = "Keywords to search for in memory. Be specific (e.g., person names, dates,"
                                + " locations).")
                        List<String> keywords,
                Agent agent, RuntimeContext ctx) {
            return owner.toolsOf(agent, ctx).retrieveFromMemory(keywords);
        }
    }

    /** The memory of a call whose scope the server would refuse: every use fails with why. */
    @SuppressWarnings("removal")
    private record FailingMemory(IllegalArgumentException why) implements LongTermMemory {
        @Override
        public Mono<Void> record(List<Msg> msgs) {
            return Mono.error(why);
        }

        @Override
        public Mono<String> retrieve(Msg msg) {
            return Mono.error(why);
        }
    }

    private static <T> T logged(String what, Throwable e, T instead) {
        log.warn("Failed to {}: {}", what, e.getMessage());
        return instead;
    }

    /**
     * Waits for the asynchronous records still in flight ({@link Builder#asyncRecord}), at most 30
     * seconds in all, then closes the connection if this middleware created it. A record still
     * running after that wait is logged at WARN and may be lost (its connection closing under it).
     */
    @Override
    public void close() {
        long deadline = System.nanoTime() + closeWait.toNanos();
        synchronized (inFlightLock) {
            while (inFlight > 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    log.warn("Closing with {} asynchronous long-term memory record(s) still in flight after waiting {}:"
                            + " they may be lost", inFlight, closeWait);
                    break;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(inFlightLock, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    log.warn("Interrupted while waiting for {} asynchronous long-term memory record(s): they may be"
                            + " lost", inFlight);
                    break;
                }
            }
        }
        calls.close();
    }

    /**
     * Builder of {@link RemoteLongTermMemoryMiddleware}: the connection options, and {@code
     * metadata} (stored with every recorded memory) and {@code limit} (memories retrieved per call,
     * 0 for the server's 5) as for {@link RemoteLongTermMemory}.
     */
    public static final class Builder extends LongTermOptions<Builder> {
        private String agentName;
        private boolean sessionAsRunName;
        private boolean failOnError;
        private Mode mode = Mode.STATIC_CONTROL;
        private boolean asyncRecord;
        private Duration closeWait = Duration.ofSeconds(30);

        private Builder() {}

        /**
         * Whether the record after a call runs apart from it, as AgentScope's {@code
         * longTermMemoryAsyncRecord(true)}: the call's {@code Flux} completes without waiting for the
         * {@code Record} RPC. What is recorded is the same either way, read from the call's slot when
         * the call ends. {@link #failOnError} does not apply to an asynchronous record: its failure
         * can only be logged at WARN ("Failed to asynchronously record to long-term memory: ..."), as
         * the hook logs it. {@link RemoteLongTermMemoryMiddleware#close} waits up to 30 seconds for
         * the records in flight. Default false: the call completes after its record (and with {@code
         * failOnError}, fails with it).
         */
        public Builder asyncRecord(boolean asyncRecord) {
            this.asyncRecord = asyncRecord;
            return this;
        }

        /** How long close() waits for asynchronous records in flight (30 s; shorter in tests). */
        Builder closeWait(Duration closeWait) {
            this.closeWait = Objects.requireNonNull(closeWait, "closeWait must not be null");
            return this;
        }

        /**
         * Who uses the memory: {@link Mode#STATIC_CONTROL} (default) retrieves and records around
         * each call, {@link Mode#AGENT_CONTROL} gives the model the {@code recordToMemory} and
         * {@code retrieveFromMemory} tools instead (registered on the agent's toolkit when the agent
         * is built), {@link Mode#BOTH} does both.
         *
         * @throws NullPointerException when {@code mode} is null
         */
        public Builder mode(Mode mode) {
            this.mode = Objects.requireNonNull(mode, "mode must not be null");
            return this;
        }

        /**
         * The agent name of every scope (mem0 {@code agent_id}); default (and null): the agent's own
         * name.
         *
         * @throws IllegalArgumentException when the name breaks the server's id rules
         */
        public Builder agentName(String agentName) {
            this.agentName = agentName == null ? null : Ids.checkId(agentName, "scope.agent_name");
            return this;
        }

        /**
         * Whether the call's session id is the scope's run name (mem0 {@code run_id}), so each
         * session of a user has its own memories; default false: a user's memories span sessions.
         */
        public Builder sessionAsRunName(boolean sessionAsRunName) {
            this.sessionAsRunName = sessionAsRunName;
            return this;
        }

        /**
         * Whether a failure (server down, a user id the server refuses) of the static retrieve or
         * record fails the agent call with a {@link RemoteMemoryException} (or {@code
         * IllegalArgumentException}); default false: it is logged at WARN and the call goes on, as
         * AgentScope's static hook does. The tools' failures are always their result text, and an
         * {@link #asyncRecord} record's failure is always logged: the call has ended.
         */
        public Builder failOnError(boolean failOnError) {
            this.failOnError = failOnError;
            return this;
        }

        /**
         * The middleware, on its own connection (or the one given).
         *
         * @throws IllegalArgumentException when the metadata breaks the server's rules or
         *     AgentScope's codec cannot write a metadata value (the message says where and why)
         */
        public RemoteLongTermMemoryMiddleware build() {
            return new RemoteLongTermMemoryMiddleware(this);
        }
    }
}
