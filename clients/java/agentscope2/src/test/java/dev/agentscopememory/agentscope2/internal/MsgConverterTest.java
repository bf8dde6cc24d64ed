package dev.agentscopememory.agentscope2.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.agentscopememory.grpc.v1.ContentBlock.BlockCase;
import dev.agentscopememory.grpc.v1.Role;
import io.agentscope.core.message.AudioBlock;
import io.agentscope.core.message.Base64Source;
import io.agentscope.core.message.DataBlock;
import io.agentscope.core.message.HintBlock;
import io.agentscope.core.message.ImageBlock;
import io.agentscope.core.message.Msg;
import io.agentscope.core.message.MsgRole;
import io.agentscope.core.message.TextBlock;
import io.agentscope.core.message.ThinkingBlock;
import io.agentscope.core.message.ToolResultBlock;
import io.agentscope.core.message.ToolUseBlock;
import io.agentscope.core.message.URLSource;
import io.agentscope.core.model.ChatUsage;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The 2.x conversion: what the wire has goes and comes back; what only 2.x has is mapped or left out. */
class MsgConverterTest {

    static Map<String, Object> metadata() {
        Map<String, Object> m = new HashMap<>();
        m.put("次数", 3);
        m.put("嵌套", Map.of("列表", List.of(1, "二")));
        return m;
    }

    @Test
    void everyBlockTheWireHasGoesAndComesBack() {
        List<Msg> msgs = List.of(
                Msg.builder().id("m1").name("用户").role(MsgRole.USER).timestamp("2026-11-27 10:00:00.000")
                        .content(List.of(TextBlock.builder().text("看图：").build(),
                                ImageBlock.builder().source(URLSource.builder().url("https://example.com/猫.png").build())
                                        .build(),
                                new AudioBlock(Base64Source.builder().mediaType("audio/wav").data("UklGRg==").build())))
                        .metadata(metadata()).build(),
                Msg.builder().id("m2").name("助手").role(MsgRole.ASSISTANT)
                        .content(List.of(ThinkingBlock.builder().thinking("想一想").metadata(Map.of("签名", "s")).build(),
                                new ToolUseBlock("c1", "查询", Map.of("城市", "北京", "天数", 3), "{\"城市\":\"北京\",\"天数\":3}",
                                        Map.of())))
                        .build(),
                Msg.builder().id("m3").name("助手").role(MsgRole.TOOL)
                        .content(ToolResultBlock.of("c1", "查询", TextBlock.builder().text("晴，25度").build()))
                        .build());
        for (Msg m : msgs) {
            dev.agentscopememory.grpc.v1.Msg wire = MsgConverter.toProto(m);
            Msg back = MsgConverter.fromProto(wire);
            // A fixpoint on the wire: nothing the server stores is lost or changed going back.
            assertEquals(wire, MsgConverter.toProto(back));
            assertEquals(m.getId(), back.getId());
            assertEquals(m.getRole(), back.getRole());
            assertEquals(m.getName(), back.getName());
            assertEquals(m.getTextContent(), back.getTextContent());
            assertEquals(m.getContent().size(), back.getContent().size());
        }
        Msg user = MsgConverter.fromProto(MsgConverter.toProto(msgs.get(0)));
        assertEquals(3, user.getMetadata().get("次数"));
        assertEquals(Map.of("列表", List.of(1, "二")), user.getMetadata().get("嵌套"));
        assertEquals("2026-11-27 10:00:00.000", user.getTimestamp());
        ToolUseBlock call = MsgConverter.fromProto(MsgConverter.toProto(msgs.get(1)))
                .getContentBlocks(ToolUseBlock.class).get(0);
        assertEquals(Map.of("城市", "北京", "天数", 3), call.getInput());
    }

    @Test
    void aHintGoesAsItsTextAndDataBlocksAndUsageStayBehind() {
        Msg hinted = Msg.builder().role(MsgRole.ASSISTANT).name("团队")
                .content(List.of(new HintBlock("h1", "用户喜欢冷笑话。", "爱丽丝"), TextBlock.builder().text("好的").build()))
                .usage(new ChatUsage(10, 2, 0.1)).build();
        dev.agentscopememory.grpc.v1.Msg wire = MsgConverter.toProto(hinted);
        assertEquals(Role.ROLE_ASSISTANT, wire.getRole());
        assertEquals(List.of("用户喜欢冷笑话。", "好的"),
                wire.getContentList().stream().map(b -> b.getText().getText()).toList());

        Msg withData = Msg.builder().role(MsgRole.USER)
                .content(List.of(TextBlock.builder().text("附件").build(), DataBlock.builder()
                        .source(Base64Source.builder().mediaType("text/plain").data("5L2g5aW9").build()).build()))
                .build();
        wire = MsgConverter.toProto(withData);
        assertEquals(List.of(BlockCase.TEXT), wire.getContentList().stream().map(b -> b.getBlockCase()).toList());
        // A tool result's data output is left out too, its text kept.
        Msg tool = Msg.builder().role(MsgRole.TOOL).content(ToolResultBlock.of("c1", "读", List.of(
                TextBlock.builder().text("内容").build(), DataBlock.builder()
                        .source(URLSource.builder().url("https://example.com/a.bin").build()).build()))).build();
        assertEquals(1, MsgConverter.toProto(tool).getContent(0).getToolResult().getOutputCount());
    }

    @Test
    void halfASurrogatePairIsRefusedNamingTheField() {
        Msg broken = Msg.builder().role(MsgRole.USER).textContent("断开的表情\ud83d").build();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> MsgConverter.toProto(broken));
        assertTrue(e.getMessage().startsWith("content[0].text: contains a lone surrogate"), e.getMessage());
    }
}
