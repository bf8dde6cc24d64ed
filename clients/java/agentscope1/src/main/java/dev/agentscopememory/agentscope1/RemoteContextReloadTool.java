package dev.agentscopememory.agentscope1;

import dev.agentscopememory.agentscope1.internal.MsgConverter;
import dev.agentscopememory.client.RemoteMemoryException;
import dev.agentscopememory.client.internal.ContextReloadTexts;
import dev.agentscopememory.grpc.v1.ReloadContextResponse;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.tool.Tool;
import io.agentscope.core.tool.ToolParam;
import java.util.List;

/**
 * The {@code context_reload} agent tool for a {@link RemoteAutoContextMemory}: same name,
 * parameter and result messages as AgentScope's {@code ContextOffloadTool}, the offloaded
 * messages coming from the server.
 */
public final class RemoteContextReloadTool {

    /** The tool's name, as AgentScope registers it. */
    public static final String TOOL_NAME = ContextReloadTexts.TOOL_NAME;

    private final RemoteAutoContextMemory memory;

    public RemoteContextReloadTool(RemoteAutoContextMemory memory) {
        this.memory = memory;
    }

    @Tool(name = TOOL_NAME, description = ContextReloadTexts.DESCRIPTION)
    public List<Msg> reload(
            @ToolParam(name = ContextReloadTexts.PARAMETER, description = ContextReloadTexts.PARAMETER_DESCRIPTION)
                    String uuid) {
        if (uuid == null || uuid.isBlank()) {
            return List.of(text(ContextReloadTexts.BLANK_UUID));
        }
        try {
            ReloadContextResponse response = memory.reloadContext(uuid);
            // When nothing is stored the server answers with AgentScope's explanatory message.
            return MsgConverter.fromProto(response.getMessagesList());
        } catch (RemoteMemoryException e) {
            return List.of(text(ContextReloadTexts.failed(uuid, e.getMessage())));
        }
    }

    private static Msg text(String text) {
        return Msg.builder().content(TextBlock.builder().text(text).build()).build();
    }
}
