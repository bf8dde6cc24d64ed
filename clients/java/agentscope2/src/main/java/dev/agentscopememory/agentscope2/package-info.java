/**
 * Adapters between AgentScope-Java 2.x ({@code io.agentscope:agentscope-core} 2.0.0 and later)
 * and an agentscope-memory server, built on {@link dev.agentscopememory.client.RemoteConnection}.
 *
 * <p>AgentScope-Java 2.x keeps an agent's state in an {@code AgentStateStore} rather than in the
 * 1.x {@code Memory}/{@code StateModule} pair, and 1.x and 2.x cannot share a classpath, so the
 * 2.x adapters live in this module of their own; the 1.x ones are in {@code
 * dev.agentscopememory.agentscope1}. The first to come is a remote {@code AgentStateStore} for
 * {@code ReActAgent.builder().stateStore(...)}, with compare-and-set versions on the server.
 * Until then the module holds no adapter, and its tests prove that the client core runs beside
 * AgentScope-Java 2.x on one classpath.
 */
package dev.agentscopememory.agentscope2;
