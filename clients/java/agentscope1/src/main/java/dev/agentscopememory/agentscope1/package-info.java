/**
 * AgentScope-Java 1.x adapters for an agentscope-memory server: {@link
 * dev.agentscopememory.agentscope1.RemoteMemory} ({@code Memory} and {@code StateModule}), {@link
 * dev.agentscopememory.agentscope1.RemoteAutoContextMemory} with {@link
 * dev.agentscopememory.agentscope1.RemoteAutoContextHook} and {@link
 * dev.agentscopememory.agentscope1.RemoteContextReloadTool}, and {@link
 * dev.agentscopememory.agentscope1.RemoteLongTermMemory} ({@code LongTermMemory}).
 *
 * <p>They are built against AgentScope-Java 1.0.9 and 1.0.12 and use only API the two share.
 * Connections, errors and the enums the builders take come from {@code dev.agentscopememory.client}
 * (module {@code agentscope-memory-grpc}), which the AgentScope-Java 2.x adapters share.
 */
package dev.agentscopememory.agentscope1;
