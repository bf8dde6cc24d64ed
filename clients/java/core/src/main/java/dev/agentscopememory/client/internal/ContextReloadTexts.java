package dev.agentscopememory.client.internal;

/**
 * The {@code context_reload} tool's name, parameter and texts, as AgentScope-Java 1.x's {@code
 * ContextOffloadTool} has them, for the 1.x and 2.x adapters' tools (compile-time constants, so
 * their {@code @Tool} and {@code @ToolParam} annotations can name them). Not public API.
 */
public final class ContextReloadTexts {

    /** The tool's name. */
    public static final String TOOL_NAME = "context_reload";

    /** The tool's description. */
    public static final String DESCRIPTION = "Bring back the original messages that context compression replaced,"
            + " given the UUID shown in a compressed message's offload tag. Use it when the full details of earlier"
            + " tool calls or long messages are needed.";

    /** The parameter's name. */
    public static final String PARAMETER = "working_context_offload_uuid";

    /** The parameter's description. */
    public static final String PARAMETER_DESCRIPTION = "The UUID from the offload tag of a compressed message";

    /** The result text for a blank UUID. */
    public static final String BLANK_UUID = "Error: UUID cannot be null or empty.";

    private ContextReloadTexts() {}

    /** The result text when reloading {@code uuid} failed with {@code message}. */
    public static String failed(String uuid, String message) {
        return "Error reloading context with UUID " + uuid + ": " + message;
    }
}
