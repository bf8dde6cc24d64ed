package dev.agentscopememory.client.internal;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import java.util.Optional;

/**
 * Sends the caller's W3C trace context ({@code traceparent}, {@code tracestate}) with every call,
 * so the server's spans join the agent's trace. Active only when {@code opentelemetry-api} is on
 * the classpath (an optional dependency) and a valid span is current on the calling thread; the
 * server understands W3C trace context only, so that is what is sent whatever propagators the
 * application configured.
 */
public final class TraceContext {
    private static final boolean AVAILABLE = classPresent("io.opentelemetry.api.trace.Span");

    private TraceContext() {
    }

    /** The interceptor, or empty when OpenTelemetry is not on the classpath. */
    public static Optional<ClientInterceptor> interceptor() {
        return AVAILABLE ? Optional.of(new Interceptor()) : Optional.empty();
    }

    private static boolean classPresent(String name) {
        try {
            Class.forName(name, false, TraceContext.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    private static final class Interceptor implements ClientInterceptor {
        @Override
        public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
                MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
            return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                @Override
                public void start(Listener<RespT> listener, Metadata headers) {
                    W3c.inject(headers);
                    super.start(listener, headers);
                }
            };
        }
    }

    /** Holds every reference to OpenTelemetry, so nothing loads it unless it is present. */
    private static final class W3c {
        static void inject(Metadata headers) {
            io.opentelemetry.context.Context context = io.opentelemetry.context.Context.current();
            if (!io.opentelemetry.api.trace.Span.fromContext(context).getSpanContext().isValid()) {
                return;
            }
            io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator.getInstance().inject(context, headers,
                    (carrier, key, value) -> carrier.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value));
        }
    }
}
