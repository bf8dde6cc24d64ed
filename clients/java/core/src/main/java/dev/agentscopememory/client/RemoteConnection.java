package dev.agentscopememory.client;

import dev.agentscopememory.client.internal.TraceContext;

import dev.agentscopememory.grpc.v1.LongTermMemoryServiceGrpc;
import dev.agentscopememory.grpc.v1.MemoryServiceGrpc;
import dev.agentscopememory.grpc.v1.StateServiceGrpc;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.lang.ref.Cleaner;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A channel to an agentscope-memory server with the per-call settings every adapter shares: the
 * deadline of each call, the API key, and the retry of calls refused with {@code UNAVAILABLE}:
 * a call that is safe to repeat is tried again, with a growing pause, until its deadline, and
 * the channel is told to redial at once, so a server killed and restarted within the deadline
 * costs the agent's turn nothing but the wait. Several adapters may share one connection; closing it closes the channel only if
 * the connection created it (from a target).
 *
 * <p>It depends on no AgentScope release, so the adapters for every AgentScope major version use
 * it alike; {@link #call} and the stub accessors are also there for RPCs no adapter wraps.
 */
public final class RemoteConnection implements AutoCloseable {

    /** The metadata header carrying the API key (the same one the Python client sends). */
    public static final Metadata.Key<String> API_KEY_HEADER =
            Metadata.Key.of("x-api-key", Metadata.ASCII_STRING_MARSHALLER);

    private static final Logger log = LoggerFactory.getLogger(RemoteConnection.class);
    /** The longest pause between two attempts of a call. */
    private static final long MAX_BACKOFF_MS = 500;

    /**
     * Shuts down the channels of connections collected without {@link #close()}: one daemon thread
     * for the process.
     */
    private static final Cleaner CLEANER = Cleaner.create(r -> {
        Thread t = new Thread(r, "agentscope-memory-channel-cleaner");
        t.setDaemon(true);
        return t;
    });

    private final Channel channel;
    private final ManagedChannel owned;
    /** Shuts {@link #owned} down, once: at close(), or when this connection is collected without it. */
    private final ChannelRelease release;
    private final Cleaner.Cleanable cleanable;
    private final ManagedChannel redial;
    /** The end (System.nanoTime) of the call() running on this thread: its attempts share it. */
    private final ThreadLocal<Long> callEnd = new ThreadLocal<>();
    private final Duration deadline;
    private final int maxAttempts;
    private final Duration retryBackoff;

    private RemoteConnection(Builder b) {
        Channel base;
        if (b.channel != null) {
            base = b.channel;
            owned = null;
        } else {
            ManagedChannelBuilder<?> mcb;
            if (b.trustedCertificates != null) {
                try {
                    mcb = Grpc.newChannelBuilder(b.target,
                            TlsChannelCredentials.newBuilder().trustManager(b.trustedCertificates.toFile()).build());
                } catch (IOException e) {
                    throw new IllegalArgumentException("trustedCertificates: cannot read "
                            + b.trustedCertificates + ": " + e.getMessage(), e);
                }
            } else {
                mcb = ManagedChannelBuilder.forTarget(b.target);
                if (b.plaintext) {
                    mcb.usePlaintext();
                }
            }
            owned = mcb.build();
            base = owned;
        }
        release = owned == null ? null : new ChannelRelease(owned, b.target);
        cleanable = release == null ? null : CLEANER.register(this, release);
        redial = base instanceof ManagedChannel managed ? managed : null;
        Channel traced = TraceContext.interceptor().map(i -> ClientInterceptors.intercept(base, i)).orElse(base);
        Channel keyed = b.apiKey == null ? traced : ClientInterceptors.intercept(traced, new ApiKeyInterceptor(b.apiKey));
        // Every stub handed out holds this connection, so a stub still in use keeps its channel open.
        channel = owned == null ? keyed : ClientInterceptors.intercept(keyed, new HeldBy(this));
        deadline = b.deadline;
        maxAttempts = b.maxAttempts;
        retryBackoff = b.retryBackoff;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The deadline applied to each call. */
    public Duration deadline() {
        return deadline;
    }

    /*
     * The stubs and call() below are what the adapters are made of. They are public because the
     * adapters live in other modules (one per AgentScope major version), and they serve a caller
     * who needs an RPC no adapter wraps; they name generated types, which follow the proto.
     */

    /**
     * Inside {@link #call}, the time its deadline has left (none once it passed: the attempt then
     * fails at once with {@code DEADLINE_EXCEEDED} and nothing is sent); elsewhere the whole deadline.
     */
    private long attemptNanos() {
        Long end = callEnd.get();
        return end == null ? deadline.toNanos() : Math.max(end - System.nanoTime(), 0L);
    }

    /**
     * A blocking {@code MemoryService} stub over this connection (API key included) whose call
     * fails after this connection's deadline (inside {@link #call}: when that call's deadline
     * ends). Take a new one per attempt: the deadline starts now.
     */
    public MemoryServiceGrpc.MemoryServiceBlockingStub memoryService() {
        return MemoryServiceGrpc.newBlockingStub(channel)
                .withDeadlineAfter(attemptNanos(), TimeUnit.NANOSECONDS);
    }

    /**
     * An asynchronous {@code MemoryService} stub without a deadline, for the server streams (such as
     * {@code WatchCompressionEvents}), which run until the caller cancels them.
     */
    public MemoryServiceGrpc.MemoryServiceStub memoryServiceAsync() {
        return MemoryServiceGrpc.newStub(channel);
    }

    /** A blocking {@code LongTermMemoryService} stub with this connection's deadline, as {@link #memoryService()}. */
    public LongTermMemoryServiceGrpc.LongTermMemoryServiceBlockingStub longTermMemoryService() {
        return LongTermMemoryServiceGrpc.newBlockingStub(channel)
                .withDeadlineAfter(attemptNanos(), TimeUnit.NANOSECONDS);
    }

    /**
     * A blocking stub of any service over this connection (API key included), with this
     * connection's deadline as {@link #memoryService()}; e.g. {@code stub(LongTermLifecycleServiceGrpc::newBlockingStub)}.
     */
    public <S extends io.grpc.stub.AbstractStub<S>> S stub(java.util.function.Function<Channel, S> factory) {
        return factory.apply(channel).withDeadlineAfter(attemptNanos(), TimeUnit.NANOSECONDS);
    }

    /**
     * An asynchronous stub of any service over this connection (API key included) without a
     * deadline, for server streams that run until the caller cancels them (such as {@code
     * WatchPoolEvents}); e.g. {@code streamStub(SharedPoolServiceGrpc::newStub)}.
     */
    public <S extends io.grpc.stub.AbstractStub<S>> S streamStub(java.util.function.Function<Channel, S> factory) {
        return factory.apply(channel);
    }

    /** A blocking {@code StateService} stub with this connection's deadline, as {@link #memoryService()}. */
    public StateServiceGrpc.StateServiceBlockingStub stateService() {
        return StateServiceGrpc.newBlockingStub(channel)
                .withDeadlineAfter(attemptNanos(), TimeUnit.NANOSECONDS);
    }

    /**
     * An asynchronous {@code StateService} stub with this connection's deadline, for the client
     * stream of {@code StreamLoadState}. Take a new one per call: the deadline starts now.
     */
    public StateServiceGrpc.StateServiceStub stateServiceAsync() {
        return StateServiceGrpc.newStub(channel)
                .withDeadlineAfter(attemptNanos(), TimeUnit.NANOSECONDS);
    }

    /** A blocking {@code ScopeService} stub (parent/child scopes) with this connection's deadline, as {@link #memoryService()}. */
    public dev.agentscopememory.grpc.v1.ScopeServiceGrpc.ScopeServiceBlockingStub scopeService() {
        return dev.agentscopememory.grpc.v1.ScopeServiceGrpc.newBlockingStub(channel)
                .withDeadlineAfter(attemptNanos(), TimeUnit.NANOSECONDS);
    }

    /** A blocking {@code AgentStateService} stub with this connection's deadline, as {@link #memoryService()}. */
    public dev.agentscopememory.grpc.v1.AgentStateServiceGrpc.AgentStateServiceBlockingStub agentStateService() {
        return dev.agentscopememory.grpc.v1.AgentStateServiceGrpc.newBlockingStub(channel)
                .withDeadlineAfter(attemptNanos(), TimeUnit.NANOSECONDS);
    }

    /**
     * Runs one RPC, turning a failure into a {@link RemoteMemoryException}. When {@code retryable}
     * (the call is idempotent, or carries a request id that makes a replay harmless), a call
     * refused with {@code UNAVAILABLE}, or cut off by a lost connection (see
     * {@link #connectionLost}), is tried again, waiting a little longer each time, until
     * the connection's deadline (counted from this call's start) or {@code maxAttempts} runs out,
     * so a server restart does not fail the agent's turn. The stubs taken inside get the time
     * that is left.
     *
     * <pre>{@code
     * long count = connection.call("MemoryService/GetMemory", true,
     *         () -> connection.memoryService().getMemory(request)).getMemory().getMessageCount();
     * }</pre>
     *
     * @param operation the RPC's name for error messages, e.g. {@code MemoryService/GetMemory}
     * @param retryable whether a replay of the call is harmless
     * @param rpc the call; it should take its stub inside, so every attempt gets a fresh deadline
     */
    public <T> T call(String operation, boolean retryable, Supplier<T> rpc) {
        int attempts = retryable ? maxAttempts : 1;
        long backoffMs = Math.max(1, retryBackoff.toMillis());
        boolean outermost = callEnd.get() == null;
        long end = outermost ? System.nanoTime() + deadline.toNanos() : callEnd.get();
        if (outermost) {
            callEnd.set(end);
        }
        long started = System.nanoTime();
        try {
            for (int attempt = 1; ; attempt++) {
                if (closed()) {
                    // gRPC answers UNAVAILABLE on a shut-down channel, which would be retried
                    // until the deadline: a closed connection never comes back, so say so at once.
                    throw RemoteMemoryException.of(operation, Status.UNAVAILABLE
                            .withDescription("the connection is closed (close() was called, or its channel shut down)")
                            .asRuntimeException());
                }
                try {
                    T result = rpc.get();
                    if (attempt > 1) {
                        log.info("{} succeeded at attempt {} after {} ms without an answer", operation, attempt,
                                TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
                    }
                    return result;
                } catch (StatusRuntimeException e) {
                    // Jitter spreads out the clients that lost the same server at the same moment.
                    long pauseMs = ThreadLocalRandom.current().nextLong(backoffMs / 2, backoffMs + 1);
                    boolean again = connectionLost(e.getStatus()) && attempt < attempts
                            && end - System.nanoTime() > TimeUnit.MILLISECONDS.toNanos(pauseMs);
                    if (!again) {
                        throw RemoteMemoryException.of(operation, e);
                    }
                    log.debug("{} unavailable (attempt {}): {}; retrying in {} ms", operation, attempt,
                            e.getStatus(), pauseMs);
                    if (redial != null) {
                        // gRPC waits out a reconnect backoff (1 s, growing) after a failed dial
                        // and fails every call meanwhile; the server may already be back.
                        redial.resetConnectBackoff();
                    }
                    try {
                        Thread.sleep(pauseMs);
                    } catch (InterruptedException ie) {
                        Thread.currentThread().interrupt();
                        throw new RemoteMemoryException(operation, Status.Code.CANCELLED, "interrupted", ie);
                    }
                }
                backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
            }
        } finally {
            if (outermost) {
                callEnd.remove();
            }
        }
    }

    /** Whether the channel was shut down (this connection closed, or a channel passed in shut down by its owner). */
    private boolean closed() {
        return redial != null && redial.isShutdown();
    }

    /**
     * Whether a call failed because the connection to the server went away rather than because
     * the server answered. gRPC reports most such failures as {@code UNAVAILABLE}, but a
     * connection that dies while a call is being written (a server killed mid-call) surfaces as
     * {@code UNKNOWN} caused by Netty's {@code ClosedChannelException} ("channel closed"): the
     * server never answered that call either, so a safe call may be tried again.
     */
    static boolean connectionLost(Status status) {
        if (status.getCode() == Status.Code.UNAVAILABLE) {
            return true;
        }
        if (status.getCode() != Status.Code.UNKNOWN) {
            return false;
        }
        for (Throwable cause = status.getCause(); cause != null; cause = cause.getCause()) {
            if (cause instanceof java.nio.channels.ClosedChannelException) {
                return true;
            }
        }
        return "channel closed".equals(status.getDescription());
    }

    /**
     * Asks the channel to dial again at once rather than after gRPC's reconnect backoff (1 s,
     * growing), as {@link #call} does between attempts; for callers retrying a stream.
     */
    void resetConnectBackoff() {
        if (redial != null) {
            redial.resetConnectBackoff();
        }
    }

    /**
     * Closes the channel if this connection created it; a channel passed in is left open. A
     * connection that created its channel and is garbage-collected without being closed (a client
     * built with {@code target(...)} and never closed) has its channel shut down then, with a
     * warning: its socket would otherwise stay open.
     */
    @Override
    public void close() {
        if (release != null) {
            release.closing = true;
            cleanable.clean();
        }
    }

    /** The channel this connection created, or null (for tests). */
    ManagedChannel ownedChannel() {
        return owned;
    }

    /**
     * Shuts an owned channel down. It holds the channel and nothing of the connection, so that the
     * connection can become unreachable while the channel is open.
     */
    private static final class ChannelRelease implements Runnable {
        private final ManagedChannel channel;
        private final String target;
        /** Set by close(): the shutdown waits for the calls under way; unset, the connection was collected. */
        volatile boolean closing;

        ChannelRelease(ManagedChannel channel, String target) {
            this.channel = channel;
            this.target = target;
        }

        @Override
        public void run() {
            if (!closing) {
                // Nobody can wait here (the cleaner's thread): calls under way end on their own.
                log.warn("a connection to {} was garbage-collected without close(): its channel is shut down now. "
                        + "Close the clients built with target(...) (try-with-resources), or share one "
                        + "RemoteConnection and close it", target);
                channel.shutdown();
                return;
            }
            channel.shutdown();
            try {
                if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
                    channel.shutdownNow();
                }
            } catch (InterruptedException e) {
                channel.shutdownNow();
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Options of a connection; a channel or a target is required. */
    public static final class Builder {
        private Channel channel;
        private String target;
        private boolean plaintext = true;
        private Path trustedCertificates;
        private Duration deadline = Duration.ofSeconds(30);
        private String apiKey;
        private int maxAttempts = Integer.MAX_VALUE;
        private Duration retryBackoff = Duration.ofMillis(50);

        private Builder() {}

        /** Use this channel (the caller keeps ownership and closes it). */
        public Builder channel(Channel channel) {
            this.channel = Objects.requireNonNull(channel, "channel must not be null");
            return this;
        }

        /** Connect to this gRPC target, e.g. {@code 127.0.0.1:50051} or {@code dns:///host:port}. */
        public Builder target(String target) {
            this.target = Objects.requireNonNull(target, "target must not be null");
            return this;
        }

        /** Plaintext (the default) or TLS for a channel created from a target. */
        public Builder plaintext(boolean plaintext) {
            this.plaintext = plaintext;
            return this;
        }

        /**
         * Use TLS, trusting the CA or self-signed certificates in this PEM file (e.g. the
         * server's {@code tls_cert_file}) instead of the system's roots.
         */
        public Builder trustedCertificates(Path pemFile) {
            this.trustedCertificates = Objects.requireNonNull(pemFile, "trustedCertificates must not be null");
            this.plaintext = false;
            return this;
        }

        /** The deadline of each call (default 30 s). */
        public Builder deadline(Duration deadline) {
            if (deadline == null || deadline.isZero() || deadline.isNegative()) {
                throw new IllegalArgumentException("deadline: must be positive");
            }
            this.deadline = deadline;
            return this;
        }

        /** The API key sent with every call as the {@code x-api-key} header. */
        public Builder apiKey(String apiKey) {
            this.apiKey = apiKey == null || apiKey.isEmpty() ? null : apiKey;
            return this;
        }

        /**
         * At most how many times a safe call refused with UNAVAILABLE is attempted in all (default:
         * no limit but the deadline; 1 turns retries off).
         */
        public Builder maxAttempts(int maxAttempts) {
            if (maxAttempts < 1) {
                throw new IllegalArgumentException("maxAttempts: must be at least 1");
            }
            this.maxAttempts = maxAttempts;
            return this;
        }

        /**
         * The wait before the first retry; it doubles with every further retry up to 500 ms, less
         * a random part of up to half (default 50 ms).
         */
        public Builder retryBackoff(Duration retryBackoff) {
            if (retryBackoff == null || retryBackoff.isNegative()) {
                throw new IllegalArgumentException("retryBackoff: must not be negative");
            }
            this.retryBackoff = retryBackoff;
            return this;
        }

        public RemoteConnection build() {
            if ((channel == null) == (target == null)) {
                throw new IllegalArgumentException("exactly one of channel and target must be given");
            }
            return new RemoteConnection(this);
        }
    }

    /** Holds the connection for whoever holds the channel (a stub); adds nothing to the calls. */
    private static final class HeldBy implements ClientInterceptor {
        @SuppressWarnings("unused")
        private final RemoteConnection connection;

        HeldBy(RemoteConnection connection) {
            this.connection = connection;
        }

        @Override
        public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
                MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
            return next.newCall(method, options);
        }
    }

    private static final class ApiKeyInterceptor implements ClientInterceptor {
        private final String apiKey;

        ApiKeyInterceptor(String apiKey) {
            this.apiKey = apiKey;
        }

        @Override
        public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
                MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
            return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                @Override
                public void start(Listener<RespT> listener, Metadata headers) {
                    headers.put(API_KEY_HEADER, apiKey);
                    super.start(listener, headers);
                }
            };
        }
    }
}
