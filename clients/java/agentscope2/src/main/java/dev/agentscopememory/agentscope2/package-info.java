/**
 * Adapters between AgentScope-Java 2.x ({@code io.agentscope:agentscope-core} 2.0.0 and later)
 * and an agentscope-memory server, built on {@link dev.agentscopememory.client.RemoteConnection}.
 *
 * <p>AgentScope-Java 2.x keeps an agent's state in an {@code AgentStateStore} rather than in the
 * 1.x {@code Memory}/{@code StateModule} pair, and 1.x and 2.x cannot share a classpath, so the
 * 2.x adapters live in this module of their own; the 1.x ones are in {@code
 * dev.agentscopememory.agentscope1}. {@link dev.agentscopememory.agentscope2.RemoteAgentStateStore}
 * is the remote {@code AgentStateStore} for {@code ReActAgent.builder().stateStore(...)}, with
 * compare-and-set versions kept on the server. {@link
 * dev.agentscopememory.agentscope2.RemoteLongTermMemory} is the 2.x build of the 1.x long-term
 * memory (the calls are core's, shared with it), and {@link
 * dev.agentscopememory.agentscope2.RemoteLongTermMemoryMiddleware} does AgentScope's static
 * long-term control per call, in the call's own user and session. {@link
 * dev.agentscopememory.agentscope2.RemoteAutoContextMiddleware} is 1.x's {@code
 * RemoteAutoContextMemory} + {@code RemoteAutoContextHook} for 2.x, which has no Memory API: the
 * server compresses each user's and session's context before every reasoning step.
 */
package dev.agentscopememory.agentscope2;
