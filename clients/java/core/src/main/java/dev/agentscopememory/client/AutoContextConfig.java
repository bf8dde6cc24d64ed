package dev.agentscopememory.client;

/**
 * The configuration of a server-side AutoContext memory, for adapters whose AgentScope has no
 * {@code AutoContextConfig} of its own (AgentScope-Java 2.x removed it with {@code
 * AutoContextMemory}): the same ten settings, names and defaults as 1.0.12's {@code
 * AutoContextConfig} and {@code PromptConfig}, so a 1.x builder call ports by changing one import.
 * The profile and token counter are the adapter builder's, as in 1.x. Each setter checks its value
 * with the server's rule and message, so a bad setting fails where it is written rather than at
 * the agent's first call.
 *
 * <pre>{@code
 * AutoContextConfig config = AutoContextConfig.builder().msgThreshold(60).lastKeep(20).build();
 * }</pre>
 */
public final class AutoContextConfig {
    private final int msgThreshold;
    private final long maxToken;
    private final double tokenRatio;
    private final int lastKeep;
    private final long largePayloadThreshold;
    private final int offloadSinglePreview;
    private final int minConsecutiveToolMessages;
    private final double currentRoundCompressionRatio;
    private final int minCompressionTokenThreshold;
    private final String previousRoundToolCompressPrompt;
    private final String previousRoundSummaryPrompt;
    private final String currentRoundLargeMessagePrompt;
    private final String currentRoundCompressPrompt;

    private AutoContextConfig(Builder b) {
        msgThreshold = b.msgThreshold;
        maxToken = b.maxToken;
        tokenRatio = b.tokenRatio;
        lastKeep = b.lastKeep;
        largePayloadThreshold = b.largePayloadThreshold;
        offloadSinglePreview = b.offloadSinglePreview;
        minConsecutiveToolMessages = b.minConsecutiveToolMessages;
        currentRoundCompressionRatio = b.currentRoundCompressionRatio;
        minCompressionTokenThreshold = b.minCompressionTokenThreshold;
        previousRoundToolCompressPrompt = b.previousRoundToolCompressPrompt;
        previousRoundSummaryPrompt = b.previousRoundSummaryPrompt;
        currentRoundLargeMessagePrompt = b.currentRoundLargeMessagePrompt;
        currentRoundCompressPrompt = b.currentRoundCompressPrompt;
    }

    public static Builder builder() {
        return new Builder();
    }

    public int getMsgThreshold() {
        return msgThreshold;
    }

    public long getMaxToken() {
        return maxToken;
    }

    public double getTokenRatio() {
        return tokenRatio;
    }

    public int getLastKeep() {
        return lastKeep;
    }

    public long getLargePayloadThreshold() {
        return largePayloadThreshold;
    }

    public int getOffloadSinglePreview() {
        return offloadSinglePreview;
    }

    public int getMinConsecutiveToolMessages() {
        return minConsecutiveToolMessages;
    }

    public double getCurrentRoundCompressionRatio() {
        return currentRoundCompressionRatio;
    }

    public int getMinCompressionTokenThreshold() {
        return minCompressionTokenThreshold;
    }

    /** The prompt for compressing earlier tool calls (strategy 1), or null for the default. */
    public String getPreviousRoundToolCompressPrompt() {
        return previousRoundToolCompressPrompt;
    }

    /** The prompt for summarising earlier rounds (strategy 4), or null for the default. */
    public String getPreviousRoundSummaryPrompt() {
        return previousRoundSummaryPrompt;
    }

    /** The prompt for summarising a large message of the current round (strategy 5), or null. */
    public String getCurrentRoundLargeMessagePrompt() {
        return currentRoundLargeMessagePrompt;
    }

    /** The prompt for compressing the current round (strategy 6), or null for the default. */
    public String getCurrentRoundCompressPrompt() {
        return currentRoundCompressPrompt;
    }

    /** Builder of {@link AutoContextConfig}; every default is AgentScope-Java 1.0.12's. */
    public static final class Builder {
        private int msgThreshold = 100;
        private long maxToken = 128 * 1024;
        private double tokenRatio = 0.75;
        private int lastKeep = 50;
        private long largePayloadThreshold = 5 * 1024;
        private int offloadSinglePreview = 200;
        private int minConsecutiveToolMessages = 6;
        private double currentRoundCompressionRatio = 0.3;
        private int minCompressionTokenThreshold = 5000;
        private String previousRoundToolCompressPrompt;
        private String previousRoundSummaryPrompt;
        private String currentRoundLargeMessagePrompt;
        private String currentRoundCompressPrompt;

        private Builder() {}

        /** Messages in the working history at which compression triggers (default 100); positive. */
        public Builder msgThreshold(int msgThreshold) {
            this.msgThreshold = positive(msgThreshold, "msg_threshold");
            return this;
        }

        /** The context budget in tokens the trigger uses (default 131072); positive. */
        public Builder maxToken(long maxToken) {
            this.maxToken = positive(maxToken, "max_token");
            return this;
        }

        /** Compression triggers at {@code maxToken * tokenRatio} tokens (default 0.75); in (0, 1]. */
        public Builder tokenRatio(double tokenRatio) {
            this.tokenRatio = ratio(tokenRatio, "token_ratio");
            return this;
        }

        /** How many most recent messages the first strategies never touch (default 50). */
        public Builder lastKeep(int lastKeep) {
            this.lastKeep = notNegative(lastKeep, "last_keep");
            return this;
        }

        /** Size in UTF-16 units above which a message counts as large (default 5120); positive. */
        public Builder largePayloadThreshold(long largePayloadThreshold) {
            this.largePayloadThreshold = positive(largePayloadThreshold, "large_payload_threshold");
            return this;
        }

        /** How many leading UTF-16 units an offload stub keeps (default 200). */
        public Builder offloadSinglePreview(int offloadSinglePreview) {
            this.offloadSinglePreview = notNegative(offloadSinglePreview, "offload_single_preview");
            return this;
        }

        /** A run of tool messages must be longer than this to be compressed (default 6). */
        public Builder minConsecutiveToolMessages(int minConsecutiveToolMessages) {
            this.minConsecutiveToolMessages = notNegative(minConsecutiveToolMessages, "min_consecutive_tool_messages");
            return this;
        }

        /** The target size of a current-round compression, as a fraction (default 0.3); in (0, 1]. */
        public Builder currentRoundCompressionRatio(double currentRoundCompressionRatio) {
            this.currentRoundCompressionRatio = ratio(currentRoundCompressionRatio, "current_round_compression_ratio");
            return this;
        }

        /** Groups and rounds estimated below this many tokens are not summarised (default 5000). */
        public Builder minCompressionTokenThreshold(int minCompressionTokenThreshold) {
            this.minCompressionTokenThreshold = notNegative(minCompressionTokenThreshold,
                    "min_compression_token_threshold");
            return this;
        }

        /** The prompt for compressing earlier tool calls; null or blank for the default. */
        public Builder previousRoundToolCompressPrompt(String prompt) {
            this.previousRoundToolCompressPrompt = prompt;
            return this;
        }

        /** The prompt for summarising earlier rounds; null or blank for the default. */
        public Builder previousRoundSummaryPrompt(String prompt) {
            this.previousRoundSummaryPrompt = prompt;
            return this;
        }

        /** The prompt for summarising a large message of the current round; null or blank for the default. */
        public Builder currentRoundLargeMessagePrompt(String prompt) {
            this.currentRoundLargeMessagePrompt = prompt;
            return this;
        }

        /** The prompt for compressing the current round; null or blank for the default. */
        public Builder currentRoundCompressPrompt(String prompt) {
            this.currentRoundCompressPrompt = prompt;
            return this;
        }

        public AutoContextConfig build() {
            return new AutoContextConfig(this);
        }

        private static int positive(int value, String field) {
            if (value <= 0) {
                throw new IllegalArgumentException("auto_context_config." + field + ": must be positive");
            }
            return value;
        }

        private static long positive(long value, String field) {
            if (value <= 0) {
                throw new IllegalArgumentException("auto_context_config." + field + ": must be positive");
            }
            return value;
        }

        private static int notNegative(int value, String field) {
            if (value < 0) {
                throw new IllegalArgumentException("auto_context_config." + field + ": must not be negative");
            }
            return value;
        }

        private static double ratio(double value, String field) {
            // Written so that NaN fails too.
            if (!(value > 0 && value <= 1)) {
                throw new IllegalArgumentException("auto_context_config." + field + ": must be in (0, 1]");
            }
            return value;
        }
    }
}
