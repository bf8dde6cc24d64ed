package dev.agentscopememory.agentscope2;

import dev.agentscopememory.client.RemoteConnection;
import dev.agentscopememory.grpc.v1.ListLongTermMemoriesRequest;
import dev.agentscopememory.grpc.v1.LongTermMemoryItem;
import dev.agentscopememory.grpc.v1.RecordRequest;
import dev.agentscopememory.grpc.v1.Scope;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.MethodDescriptor;
import io.agentscope.core.ReActAgent;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.state.InMemoryAgentStateStore;
import io.agentscope.core.tool.Toolkit;
import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;

/**
 * What the long-term memory agent tests share: the agent they run (a real 2.0.0 {@code ReActAgent}
 * named "Assistant" with a scripted model, the weather tool and an in-memory state store) and what
 * they read back (a scope's stored memories, the calls a channel sent and the texts of its {@code
 * Record} calls).
 */
final class LongTermAgents {

    /** How long a test waits for an agent call. */
    static final Duration WAIT = Duration.ofSeconds(180);

    private LongTermAgents() {}

    /** A connection to the tests' server with a deadline long enough for a loaded machine. */
    static RemoteConnection connect(String target) {
        return RemoteConnection.builder().target(target).deadline(Duration.ofSeconds(120)).build();
    }

    static ContentBlock text(String text) {
        return TextBlock.builder().text(text).build();
    }

    /** The agent every long-term test runs, before its memory or middleware is added. */
    static ReActAgent.Builder agent(ScriptedModel model) {
        Toolkit toolkit = new Toolkit();
        toolkit.registerTool(new WeatherTools());
        return ReActAgent.builder().name("Assistant").sysPrompt("你记得用户的事情。").model(model)
                .toolkit(toolkit).maxIters(5).stateStore(new InMemoryAgentStateStore());
    }

    /** The memory texts stored in a scope, as the server lists them. */
    static List<String> memories(RemoteConnection connection, String agentName, String userId) {
        Scope scope = Scope.newBuilder().setAgentName(agentName).setUserId(userId).build();
        return connection.longTermMemoryService()
                .listLongTermMemories(ListLongTermMemoriesRequest.newBuilder().setScope(scope).setPageSize(100).build())
                .getMemoriesList().stream().map(LongTermMemoryItem::getMemory).collect(Collectors.toList());
    }

    /** The text of each message a {@code Record} call sent. */
    static List<String> texts(RecordRequest request) {
        return request.getMessagesList().stream()
                .map(m -> m.getContentList().stream().map(b -> b.getText().getText()).collect(Collectors.joining()))
                .toList();
    }

    /** Counts the RPCs (by method name) sent through the channel and keeps the RecordRequests. */
    static ClientInterceptor counting(List<String> methods, List<RecordRequest> records) {
        return new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                methods.add(method.getBareMethodName());
                return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                    @Override
                    public void sendMessage(Q message) {
                        if (message instanceof RecordRequest r) {
                            records.add(r);
                        }
                        super.sendMessage(message);
                    }
                };
            }
        };
    }

    /** How many of the calls {@link #counting} saw were {@code name}. */
    static long count(List<String> methods, String name) {
        return methods.stream().filter(name::equals).count();
    }
}
