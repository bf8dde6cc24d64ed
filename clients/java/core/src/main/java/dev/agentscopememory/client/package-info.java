/**
 * The part of the agentscope-memory Java client that depends on no AgentScope release: {@link
 * dev.agentscopememory.client.RemoteConnection} (a channel with deadline, API key and retries),
 * the {@link dev.agentscopememory.client.RemoteMemoryException} failures, the enums of the
 * choices the adapters' builders offer, {@link dev.agentscopememory.client.AutoContextConfig} (for
 * an AgentScope without its own), and {@link dev.agentscopememory.client.SharedMemoryPool}
 * (shared memory pools, whose entries name no AgentScope type; it needs reactor-core on the
 * classpath, which AgentScope-Java brings).
 *
 * <p>The adapters for AgentScope-Java 1.x ({@code agentscope-memory-agentscope1}) and 2.x
 * ({@code agentscope-memory-agentscope2}) build on it; 1.x and 2.x cannot share a classpath, so
 * nothing here may name an AgentScope type. The stubs generated from the proto files live beside
 * it in {@code dev.agentscopememory.grpc.v1}.
 */
package dev.agentscopememory.client;
