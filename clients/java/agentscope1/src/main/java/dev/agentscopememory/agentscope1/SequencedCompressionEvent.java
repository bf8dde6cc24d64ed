package dev.agentscopememory.agentscope1;

import io.agentscope.core.memory.autocontext.CompressionEvent;

/**
 * A compression event with the number the server gave it: 1 for a memory's first event, larger for
 * every later one, never reused (also after a session load replaced the events). Pass the last
 * sequence seen to {@link RemoteAutoContextMemory#watchCompressionEvents(long)} to resume.
 *
 * @param sequence the event's number in its memory
 * @param event the event, as AgentScope's {@code AutoContextMemory} records it
 */
public record SequencedCompressionEvent(long sequence, CompressionEvent event) {}
