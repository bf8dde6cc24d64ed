package dev.agentscopememory.examples;

import io.agentscope.core.tool.Toolkit;
import io.agentscope.core.tool.mcp.McpClientBuilder;
import io.agentscope.core.tool.mcp.McpClientWrapper;

/**
 * The memory tools on an AgentScope-Java {@link Toolkit} through MCP, as the README shows them:
 * the README's code blocks are the regions between the {@code README:} markers (a test checks
 * they agree), and {@code McpMemoryToolsTest} runs them against a real server.
 */
public final class McpMemoryExample {

    private McpMemoryExample() {}

    /** Over streamable HTTP: the server runs with {@code mcp_port} set. */
    public static Toolkit overHttp(String url, String apiKey) {
        // README:mcp-java-http-begin
        McpClientWrapper memory = McpClientBuilder.create("agentscope-memory")
                .streamableHttpTransport(url)                 // e.g. "http://127.0.0.1:8765/mcp"
                .header("Authorization", "Bearer " + apiKey)  // the gRPC API key; omit without keys
                .queryParam("user_id", "alice")               // fixed: the model cannot pick another user
                .buildAsync().block();
        Toolkit toolkit = new Toolkit();
        toolkit.registerMcpClient(memory).block();            // add_long_term_memory, search_..., ...
        // README:mcp-java-http-end
        return toolkit;
    }

    /** Over stdio: AgentScope starts {@code agentscope-memory mcp} itself. */
    public static Toolkit overStdio(String command, String dataDir) {
        // README:mcp-java-stdio-begin
        McpClientWrapper memory = McpClientBuilder.create("agentscope-memory")
                .stdioTransport(command, "mcp", "--data-dir", dataDir, "--user-id", "alice")
                .buildAsync().block();
        Toolkit toolkit = new Toolkit();
        toolkit.registerMcpClient(memory).block();
        // README:mcp-java-stdio-end
        return toolkit;
    }
}
