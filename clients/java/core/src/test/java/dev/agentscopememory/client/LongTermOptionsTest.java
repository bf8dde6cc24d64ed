package dev.agentscopememory.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.agentscopememory.grpc.v1.Scope;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * The options of the long-term memory builders (both AgentScope majors' {@code
 * RemoteLongTermMemory} and the 2.x middleware): a null argument is refused at the option's call,
 * with a message naming the option, unless null means "none" as in {@code Mem0LongTermMemory}'s
 * builder.
 */
class LongTermOptionsTest {

    /** The smallest long-term builder: what a {@code RemoteLongTermMemory.Builder} adds nothing to. */
    static final class Options extends LongTermScopeOptions<Options> {}

    static void refused(Class<? extends RuntimeException> type, String message, Executable option) {
        assertEquals(message, assertThrows(type, option).getMessage());
    }

    @Test
    void aNullArgumentIsRefusedAtTheOptionsCallNamingIt() {
        Map<String, Object> nullKey = new HashMap<>();
        nullKey.put("来源", "测试");
        nullKey.put(null, "无键");
        // Was accepted, then failed at build() as AgentScope's "Failed to serialize object to JSON".
        refused(NullPointerException.class, "metadata keys must not be null", () -> new Options().metadata(nullKey));
        // The connection options every builder inherits.
        refused(NullPointerException.class, "connection must not be null", () -> new Options().connection(null));
        refused(NullPointerException.class, "channel must not be null", () -> new Options().channel(null));
        refused(NullPointerException.class, "target must not be null", () -> new Options().target(null));
        refused(NullPointerException.class, "trustedCertificates must not be null",
                () -> new Options().trustedCertificates(null));
        refused(IllegalArgumentException.class, "deadline: must be positive", () -> new Options().deadline(null));
        refused(IllegalArgumentException.class, "retryBackoff: must not be negative",
                () -> new Options().retryBackoff(null));
        // A refused option leaves what was given before.
        Options options = new Options().userId("张三").metadata(Map.of("来源", "测试"));
        assertThrows(NullPointerException.class, () -> options.metadata(nullKey));
        assertEquals(Map.of("来源", "测试"), options.metadataValues());
    }

    @Test
    void aNullScopeIdOrMetadataIsNoneAsInMem0sBuilder() {
        Options options = new Options().agentName("助手").agentName(null).userId("张三").runName(null)
                .metadata(Map.of("来源", "测试")).metadata(null).apiKey(null);
        assertEquals(Scope.newBuilder().setUserId("张三").build(), options.scope());
        assertEquals(Map.of(), options.metadataValues());
        // All three not given: AgentScope's Mem0LongTermMemory message, at build().
        refused(IllegalArgumentException.class, "At least one of agentName, userId, or runName must be provided",
                () -> new Options().userId("张三").userId(null).scope());
        // Empty ids are not ids either: a scope of none would fail every call at the server.
        refused(IllegalArgumentException.class, "At least one of agentName, userId, or runName must be provided",
                () -> new Options().agentName("").userId("").scope());
    }
}
