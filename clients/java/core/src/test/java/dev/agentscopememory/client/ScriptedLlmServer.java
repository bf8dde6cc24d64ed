package dev.agentscopememory.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * The one test double the project allows: an OpenAI-compatible chat endpoint on 127.0.0.1 that
 * answers every {@code /chat/completions} call with the same text and token usage (streamed as
 * server-sent events when the request asks for it), recording the requests.
 *
 * <p>Public, and shipped in this module's test-jar (as {@link TestServer}), because the agent tests
 * of both adapter modules run against it; it names no AgentScope type.
 */
public final class ScriptedLlmServer implements AutoCloseable {

    private static final ObjectMapper JSON = new ObjectMapper();

    private final HttpServer http;
    private final String reply;
    private final int promptTokens;
    private final int completionTokens;
    private final List<JsonNode> requests = Collections.synchronizedList(new ArrayList<>());

    public ScriptedLlmServer(String reply, int promptTokens, int completionTokens) throws IOException {
        this.reply = reply;
        this.promptTokens = promptTokens;
        this.completionTokens = completionTokens;
        http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        http.createContext("/", this::handle);
        http.start();
    }

    /** The base URL to configure ({@code AGENTSCOPE_MEMORY_LLM_BASE_URL}). */
    public String baseUrl() {
        return "http://127.0.0.1:" + http.getAddress().getPort() + "/v1";
    }

    /** The chat requests received so far, in order, as JSON. */
    public List<JsonNode> requests() {
        return requests;
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange) {
            if (!exchange.getRequestURI().getPath().endsWith("/chat/completions")) {
                exchange.sendResponseHeaders(404, -1);
                return;
            }
            JsonNode request = JSON.readTree(exchange.getRequestBody().readAllBytes());
            requests.add(request);
            boolean stream = request.path("stream").asBoolean(false);
            String model = request.path("model").asText("scripted");
            ObjectNode usage = JSON.createObjectNode()
                    .put("prompt_tokens", promptTokens)
                    .put("completion_tokens", completionTokens)
                    .put("total_tokens", promptTokens + completionTokens);
            byte[] body;
            if (stream) {
                ObjectNode chunk = JSON.createObjectNode().put("id", "chatcmpl-scripted").put("object", "chat.completion.chunk")
                        .put("created", 0).put("model", model);
                chunk.putArray("choices").addObject().put("index", 0)
                        .putNull("finish_reason")
                        .putObject("delta").put("role", "assistant").put("content", reply);
                ObjectNode last = JSON.createObjectNode().put("id", "chatcmpl-scripted").put("object", "chat.completion.chunk")
                        .put("created", 0).put("model", model);
                last.putArray("choices").addObject().put("index", 0).put("finish_reason", "stop").putObject("delta");
                last.set("usage", usage);
                body = ("data: " + JSON.writeValueAsString(chunk) + "\n\n"
                        + "data: " + JSON.writeValueAsString(last) + "\n\n"
                        + "data: [DONE]\n\n").getBytes(StandardCharsets.UTF_8);
                exchange.getResponseHeaders().add("Content-Type", "text/event-stream");
            } else {
                ObjectNode response = JSON.createObjectNode().put("id", "chatcmpl-scripted").put("object", "chat.completion")
                        .put("created", 0).put("model", model);
                response.putArray("choices").addObject().put("index", 0).put("finish_reason", "stop")
                        .putObject("message").put("role", "assistant").put("content", reply);
                response.set("usage", usage);
                body = JSON.writeValueAsBytes(response);
                exchange.getResponseHeaders().add("Content-Type", "application/json");
            }
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        }
    }

    @Override
    public void close() {
        http.stop(0);
    }
}
