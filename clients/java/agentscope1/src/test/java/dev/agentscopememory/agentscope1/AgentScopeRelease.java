package dev.agentscopememory.agentscope1;

import org.junit.jupiter.api.Assumptions;

/**
 * The AgentScope-Java release the tests run against ({@code -Dagentscope.version}, passed on by
 * surefire). 1.0.12 is the compatibility target; the reachable Maven Central stops at 1.0.9, whose
 * AutoContextMemory lacks fixes the server follows, so comparisons that hinge on those fixes run
 * only against 1.0.12 or later.
 */
final class AgentScopeRelease {

    static final String TARGET = "1.0.12";

    private AgentScopeRelease() {}

    static String current() {
        return System.getProperty("agentscope.version", "unknown");
    }

    /** Whether the release on the classpath is {@code version} or newer. */
    static boolean atLeast(String version) {
        int[] have = parse(current());
        int[] want = parse(version);
        for (int i = 0; i < 3; i++) {
            if (have[i] != want[i]) {
                return have[i] > want[i];
            }
        }
        return true;
    }

    /** Skips the calling test unless the classpath carries the 1.0.12 behaviour it compares. */
    static void assumeTarget(String why) {
        Assumptions.assumeTrue(atLeast(TARGET),
                "needs AgentScope " + TARGET + " (run with -Dagentscope.version=" + TARGET + "); "
                        + current() + " " + why);
    }

    private static int[] parse(String version) {
        int[] out = new int[3];
        String[] parts = version.split("[.-]");
        for (int i = 0; i < 3 && i < parts.length; i++) {
            try {
                out[i] = Integer.parseInt(parts[i]);
            } catch (NumberFormatException e) {
                return new int[] {0, 0, 0};
            }
        }
        return out;
    }
}
