package dev.agentscopememory.agentscope1;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import java.util.function.UnaryOperator;

/** Test channels on which each message the server sends passes a tap before the client sees it. */
final class AnswerTaps {

    private AnswerTaps() {}

    /** {@code channel}, with each answer given to {@code tap}; the client gets what the tap returns. */
    static Channel eachAnswer(Channel channel, UnaryOperator<Object> tap) {
        return ClientInterceptors.intercept(channel, new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                    @Override
                    public void start(Listener<R> listener, Metadata headers) {
                        super.start(new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                            @Override
                            @SuppressWarnings("unchecked")
                            public void onMessage(R message) {
                                super.onMessage((R) tap.apply(message));
                            }
                        }, headers);
                    }
                };
            }
        });
    }
}
