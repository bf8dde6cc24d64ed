package dev.agentscopememory.agentscope1;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.MethodDescriptor;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/** Test channels that count the calls a client starts, by method. */
final class CountedCalls {

    private CountedCalls() {}

    /**
     * {@code channel}, adding one to the counter of each call's method ({@code counters} by bare
     * method name, e.g. {@code "GetMessages"}); calls of other methods are not counted.
     */
    static Channel on(Channel channel, Map<String, AtomicInteger> counters) {
        return ClientInterceptors.intercept(channel, new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                AtomicInteger counter = counters.get(method.getBareMethodName());
                if (counter != null) {
                    counter.incrementAndGet();
                }
                return next.newCall(method, options);
            }
        });
    }
}
