package dev.agentscopememory.agentscope1;

import io.agentscope.core.message.AudioBlock;
import io.agentscope.core.message.Base64Source;
import io.agentscope.core.message.ContentBlock;
import io.agentscope.core.message.GenerateReason;
import io.agentscope.core.message.ImageBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ThinkingBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.message.URLSource;
import io.agentscope.core.message.VideoBlock;
import io.agentscope.core.model.ChatUsage;
import io.agentscope.core.util.JsonUtils;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Messages covering every block type and every null AgentScope-Java can write. */
public final class SampleMessages {

    private SampleMessages() {}

    public static Map<String, Msg> all() {
        Map<String, Msg> out = new LinkedHashMap<>();
        out.put("text", Msg.builder().id("m-text").name("Alice").role(MsgRole.USER)
                .textContent("Hello, 世界 \uD83D\uDE00 \"quoted\"\nline2").timestamp("2026-04-30 10:51:33.123").build());
        out.put("empty text", Msg.builder().id("m-empty").role(MsgRole.USER)
                .content(TextBlock.builder().text("").build()).timestamp("2026-04-30 10:51:33.124").build());
        out.put("no content", Msg.builder().id("m-none").role(MsgRole.ASSISTANT)
                .content(List.of()).timestamp("2026-04-30 10:51:33.125").build());
        out.put("thinking without metadata", Msg.builder().id("m-think").name("Assistant")
                .role(MsgRole.ASSISTANT)
                .content(ThinkingBlock.builder().thinking("Let me think").build(),
                        TextBlock.builder().text("Answer").build())
                .timestamp("2026-04-30 10:51:33.126").build());
        Map<String, Object> reasoning = new HashMap<>();
        reasoning.put("reasoningDetails", List.of(Map.of("k", "v"), Map.of("n", 3)));
        out.put("thinking with metadata", Msg.builder().id("m-think2").name("Assistant")
                .role(MsgRole.ASSISTANT)
                .content(ThinkingBlock.builder().thinking("x").metadata(reasoning).build())
                .timestamp("2026-04-30 10:51:33.127").build());

        Map<String, Object> input = new HashMap<>();
        input.put("city", "Paris");
        input.put("days", 3);
        input.put("big", 12345678901L);
        input.put("ratio", 0.25);
        input.put("nested", Map.of("a", List.of(1, 2.5, "x", true)));
        Map<String, Object> usage = new HashMap<>();
        usage.put(Msg.METADATA_GENERATE_REASON, "TOOL_CALLS");
        usage.put("_chat_usage", new ChatUsage(120, 35, 1.25));
        out.put("tool_use without content", Msg.builder().id("m-tu1").name("Assistant")
                .role(MsgRole.ASSISTANT)
                .content(new ToolUseBlock("call_1", "get_weather", input))
                .metadata(usage).timestamp("2026-04-30 10:51:34.000").build());
        out.put("tool_use with content", Msg.builder().id("m-tu2").name("Assistant")
                .role(MsgRole.ASSISTANT)
                .content(new ToolUseBlock("call_2", "get_weather", Map.of("city", "Paris"),
                        "{\"city\":\"Paris\"}", Map.of(ToolUseBlock.METADATA_THOUGHT_SIGNATURE, "abc")))
                .timestamp("2026-04-30 10:51:34.001").build());

        out.put("tool_result", Msg.builder().id("m-tr").name("Assistant").role(MsgRole.TOOL)
                .content(ToolResultBlock.of("call_1", "get_weather", TextBlock.builder().text("\"Sunny, 21C\"").build()))
                .timestamp("2026-04-30 10:51:34.456").build());
        ToolUseBlock pending = new ToolUseBlock("call_3", "external", Map.of());
        out.put("tool_result suspended", Msg.builder().id("m-trs").name("Assistant").role(MsgRole.TOOL)
                .content(ToolResultBlock.suspended(pending)).timestamp("2026-04-30 10:51:34.457").build());
        out.put("tool_result null id and name", Msg.builder().id("m-trn").role(MsgRole.TOOL)
                .content(new ToolResultBlock(null, null, List.of(TextBlock.builder().text("hi").build()), null))
                .timestamp("2026-04-30 10:51:34.458").build());
        List<ContentBlock> mixed = new ArrayList<>();
        mixed.add(TextBlock.builder().text("a").build());
        mixed.add(ImageBlock.builder().source(URLSource.builder().url("https://x/y.png").build()).build());
        mixed.add(AudioBlock.builder().source(Base64Source.builder().mediaType("audio/wav").data("UklGRg==").build()).build());
        out.put("tool_result with media output", Msg.builder().id("m-trm").name("Assistant").role(MsgRole.TOOL)
                .content(ToolResultBlock.of("call_4", "render", mixed, Map.of("k", "v")))
                .timestamp("2026-04-30 10:51:34.459").build());

        out.put("image url", Msg.builder().id("m-img1").role(MsgRole.USER)
                .content(ImageBlock.builder().source(URLSource.builder().url("https://example.com/a.png").build()).build())
                .timestamp("2026-04-30 10:51:35.000").build());
        out.put("image base64", Msg.builder().id("m-img2").role(MsgRole.USER)
                .content(ImageBlock.builder().source(Base64Source.builder().mediaType("image/png").data("iVBORw0KGgo=").build()).build())
                .timestamp("2026-04-30 10:51:35.001").build());
        out.put("audio url", Msg.builder().id("m-aud1").role(MsgRole.USER)
                .content(AudioBlock.builder().source(URLSource.builder().url("https://example.com/a.wav").build()).build())
                .timestamp("2026-04-30 10:51:35.002").build());
        out.put("audio base64", Msg.builder().id("m-aud2").role(MsgRole.USER)
                .content(AudioBlock.builder().source(Base64Source.builder().mediaType("audio/wav").data("UklGRg==").build()).build())
                .timestamp("2026-04-30 10:51:35.003").build());
        out.put("video url", Msg.builder().id("m-vid1").role(MsgRole.USER)
                .content(VideoBlock.builder().source(URLSource.builder().url("https://example.com/v.mp4").build()).build())
                .timestamp("2026-04-30 10:51:35.004").build());
        out.put("video base64", Msg.builder().id("m-vid2").role(MsgRole.USER)
                .content(VideoBlock.builder().source(Base64Source.builder().mediaType("video/mp4").data("AAAA").build()).build())
                .timestamp("2026-04-30 10:51:35.005").build());

        // The 1.0.12 size options; an older AgentScope release drops them when reading.
        out.put("image and video with size options", JsonUtils.getJsonCodec().fromJson(
                "{\"id\":\"m-px\",\"name\":null,\"role\":\"USER\",\"content\":["
                        + "{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://e/a.png\"},\"minPixels\":100,\"maxPixels\":2000},"
                        + "{\"type\":\"video\",\"source\":{\"type\":\"url\",\"url\":\"https://e/v.mp4\"},\"fps\":2.0,\"maxFrames\":10,\"minPixels\":1,\"maxPixels\":2,\"totalPixels\":3}"
                        + "],\"metadata\":{},\"timestamp\":\"2026-04-30 10:51:35.006\"}", Msg.class));
        out.put("null name, role, timestamp and id", JsonUtils.getJsonCodec().fromJson(
                "{\"id\":null,\"name\":null,\"role\":null,\"content\":[{\"type\":\"text\",\"text\":\"ok\"}],"
                        + "\"metadata\":{},\"timestamp\":null}", Msg.class));
        Map<String, Object> meta = new HashMap<>();
        meta.put("int", 1);
        meta.put("long", 9007199254740993L);
        meta.put("double", 1.5);
        meta.put("whole double", 2.0);
        meta.put("string", "s");
        meta.put("bool", false);
        meta.put("list", List.of(1, "two", List.of(3.0)));
        meta.put("nested", Map.of("deep", Map.of("x", "y")));
        out.put("metadata types", Msg.builder().id("m-meta").role(MsgRole.SYSTEM).textContent("sys")
                .metadata(meta).generateReason(GenerateReason.MAX_ITERATIONS)
                .timestamp("2026-04-30 10:51:36.000").build());
        return out;
    }

    /** The text of each message, in order: what most assertions on a history compare. */
    public static List<String> texts(List<Msg> messages) {
        List<String> out = new ArrayList<>();
        for (Msg m : messages) {
            out.add(m.getTextContent());
        }
        return out;
    }
}
