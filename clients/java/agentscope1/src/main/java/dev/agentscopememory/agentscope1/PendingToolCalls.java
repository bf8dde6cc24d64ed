package dev.agentscopememory.agentscope1;

import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Tool calls a conversation was left with, unanswered: the tool-use blocks of the last assistant
 * message whose ids have no tool result anywhere in the memory (the rule ReActAgent applies
 * before it refuses a call with "pending tool calls"). {@link #interruptedResults} answers each
 * with an error result, as AgentScope 1.0.12's {@code enablePendingToolRecovery} does, so the
 * model learns the call was cut off and the conversation goes on.
 */
public final class PendingToolCalls {

    /** The text of an interrupted call's result; the same as the Python library's. */
    public static final String INTERRUPTED =
            "[ERROR] The call of tool %s was interrupted before its result was stored; it may or may"
                    + " not have run. Call it again if its result is still needed.";

    private PendingToolCalls() {}

    /** The unanswered tool calls of {@code messages}, in the order the assistant made them. */
    public static List<ToolUseBlock> find(List<Msg> messages) {
        Msg lastAssistant = null;
        for (int i = messages.size() - 1; i >= 0; i--) {
            if (messages.get(i).getRole() == MsgRole.ASSISTANT) {
                lastAssistant = messages.get(i);
                break;
            }
        }
        if (lastAssistant == null) {
            return List.of();
        }
        Set<String> answered = new HashSet<>();
        for (Msg m : messages) {
            for (ToolResultBlock r : m.getContentBlocks(ToolResultBlock.class)) {
                answered.add(r.getId());
            }
        }
        List<ToolUseBlock> pending = new ArrayList<>();
        for (ToolUseBlock use : lastAssistant.getContentBlocks(ToolUseBlock.class)) {
            if (!answered.contains(use.getId())) {
                pending.add(use);
            }
        }
        return pending;
    }

    /** One TOOL message per unanswered call of {@code messages}, named after the agent. */
    public static List<Msg> interruptedResults(List<Msg> messages, String agentName) {
        List<Msg> out = new ArrayList<>();
        for (ToolUseBlock use : find(messages)) {
            TextBlock text = TextBlock.builder().text(String.format(INTERRUPTED, use.getName())).build();
            out.add(Msg.builder().name(agentName).role(MsgRole.TOOL)
                    .content(ToolResultBlock.of(use.getId(), use.getName(), text)).build());
        }
        return out;
    }
}
