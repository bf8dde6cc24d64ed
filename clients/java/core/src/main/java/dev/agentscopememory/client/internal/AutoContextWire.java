package dev.agentscopememory.client.internal;

import dev.agentscopememory.client.AutoContextConfig;
import dev.agentscopememory.client.AutoContextProfile;
import dev.agentscopememory.client.TokenCounter;
import dev.agentscopememory.grpc.v1.PromptConfig;

/**
 * Core's {@link AutoContextConfig} as the wire {@code AutoContextConfig}. Not public API: it is
 * public only so the adapter modules can use it, and may change in any release.
 */
public final class AutoContextWire {

    private AutoContextWire() {}

    /** Every field sent explicitly, as agentscope1's adapter sends AgentScope's config. */
    public static dev.agentscopememory.grpc.v1.AutoContextConfig toProto(
            AutoContextConfig c, AutoContextProfile profile, TokenCounter tokenCounter) {
        dev.agentscopememory.grpc.v1.AutoContextConfig.Builder out = dev.agentscopememory.grpc.v1.AutoContextConfig
                .newBuilder()
                .setMsgThreshold(c.getMsgThreshold())
                .setMaxToken(c.getMaxToken())
                .setTokenRatio(c.getTokenRatio())
                .setLastKeep(c.getLastKeep())
                .setLargePayloadThreshold(c.getLargePayloadThreshold())
                .setOffloadSinglePreview(c.getOffloadSinglePreview())
                .setMinConsecutiveToolMessages(c.getMinConsecutiveToolMessages())
                .setCurrentRoundCompressionRatio(c.getCurrentRoundCompressionRatio())
                .setMinCompressionTokenThreshold(c.getMinCompressionTokenThreshold())
                .setProfile(WireEnums.toProto(profile))
                .setTokenCounter(WireEnums.toProto(tokenCounter));
        PromptConfig.Builder prompts = PromptConfig.newBuilder();
        boolean any = false;
        if (c.getPreviousRoundToolCompressPrompt() != null) {
            prompts.setPreviousRoundToolCompressPrompt(
                    Utf16.checkText(c.getPreviousRoundToolCompressPrompt(), "previous_round_tool_compress_prompt"));
            any = true;
        }
        if (c.getPreviousRoundSummaryPrompt() != null) {
            prompts.setPreviousRoundSummaryPrompt(
                    Utf16.checkText(c.getPreviousRoundSummaryPrompt(), "previous_round_summary_prompt"));
            any = true;
        }
        if (c.getCurrentRoundLargeMessagePrompt() != null) {
            prompts.setCurrentRoundLargeMessagePrompt(
                    Utf16.checkText(c.getCurrentRoundLargeMessagePrompt(), "current_round_large_message_prompt"));
            any = true;
        }
        if (c.getCurrentRoundCompressPrompt() != null) {
            prompts.setCurrentRoundCompressPrompt(
                    Utf16.checkText(c.getCurrentRoundCompressPrompt(), "current_round_compress_prompt"));
            any = true;
        }
        if (any) {
            out.setCustomPrompt(prompts);
        }
        return out.build();
    }
}
