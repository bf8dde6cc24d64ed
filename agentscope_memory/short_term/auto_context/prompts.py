"""Prompts of the summariser calls, written for this project (what they ask for follows
AgentScope-Java's AutoContextMemory, reference/autocontext.md §12), and the fixed texts
(offload tag, end marker, plan hint, hook instruction) that must match Java."""

from __future__ import annotations

from agentscope_memory.short_term.auto_context.config import PromptConfig

OFFLOAD_TAG = "<!-- CONTEXT_OFFLOAD: uuid={} -->"
END_MARKER = "Above is the message list that needs to be compressed."

TOOL_COMPRESS_PROMPT = (
    "You are an expert content compression specialist. The messages below are a history of "
    "tool invocations from earlier in a conversation. Rewrite them as compact plain text that an "
    "agent can rely on later.\n"
    "- For every call keep the tool name, the exact arguments and a short factual account of "
    "what it returned.\n"
    "- If the same call was repeated with the same result, write it once and say how often it "
    "happened; list separately only argument combinations that led to different results.\n"
    "- Leave out noise that varies between calls, such as timestamps or request ids.\n"
    "- Treat tools whose name or output suggests a change (write, update, delete, create, "
    "saved, written) as write operations: keep paths, keys, the content written, the state "
    "change and whether it succeeded or failed.\n"
    "- If an output was cut off or unreadable, mark it [TRUNCATED].\n"
    "Answer in plain text only: no markdown, JSON, bullet lists, headings or comments about the "
    "task."
)

ROUND_SUMMARY_PROMPT = (
    "You compress dialogue. Below is one earlier round of a conversation: the user's question, "
    "the assistant's work (tool calls and their results) and the assistant's final answer. "
    "Rewrite the final answer as one self-contained, concise reply that already contains every "
    "fact the round established, without mentioning tools, function calls or how the work was "
    "done. Your text replaces the assistant's messages so that the round becomes a clean "
    "question and answer.\n"
    "Keep exactly: file paths and what was read or changed in them, error messages, ids, URLs, "
    "ports, status codes, configuration values and keys, the outcome of every write, and the "
    "state of services or processes. Say what changed and where, and what failed. Merge "
    "repetition. Do not add phrases about the summary itself. Plain text only."
)

LARGE_MESSAGE_PROMPT = (
    "You are an expert content compression specialist. The message below is part of the "
    "conversation's current round and exceeded the size limit, so it must be shortened. Because "
    "the agent is still working with it, be careful and conservative: keep every critical fact "
    "and key detail, the context the next steps will need, outcomes and status, and any tool "
    "call information (tool names, call ids, important parameters). Plain text only."
)

CURRENT_ROUND_PROMPT = (
    "You consolidate context. The messages below are the current turn's tool calls and their "
    "results (plan-management calls are already removed; the user's request is not included). "
    "They may start with an earlier consolidated block that ends with an offload marker line.\n"
    "How to work: if such a marker line is present, copy all text before it unchanged and "
    "process only the calls after it; otherwise process everything. Write each call and its "
    "result as one first-person sentence of the form \"I called <tool> with <arguments>; it "
    "returned: <key details>\", keeping technical specifics (paths, values, ids, numbers). If a "
    "result is malformed or cut off, include it verbatim after [UNPARSED OUTPUT].\n"
    "Output one plain-text block: the earlier context, a newline, then the new sentences. Never "
    "write an offload marker yourself (one is added afterwards), do not speculate about the "
    "user's intent, and use no markdown, JSON or bullet lists. You may drop boilerplate, "
    "repeated success notices and repeated log prefixes; never paste raw tool JSON and never "
    "change the earlier context."
)

CHAR_REQUIREMENT = (
    "\nCOMPRESSION REQUIREMENT:\n"
    "The content above is about {orig} characters long. Your result MUST be about {target} "
    "characters ({pct}% of the original). This is a strict requirement; meet it while following "
    "the instructions above."
)

HOOK_INSTRUCTION = (
    "Some earlier messages were compressed to save context and carry markers such as "
    "<!-- CONTEXT_OFFLOAD: uuid=... -->.\n"
    "When you need the full original content behind such a marker, call the context_reload tool "
    "with that uuid as working_context_offload_uuid.\n"
    "Never mention or quote uuids, offload markers or other internal metadata in your replies."
)


def _pick(custom: str | None, default: str) -> str:
    # Java PromptProvider: the custom prompt unless it is null or blank.
    return custom if custom is not None and custom.strip() else default


def tool_compress_prompt(config: PromptConfig) -> str:
    return _pick(config.previous_round_tool_compress_prompt, TOOL_COMPRESS_PROMPT)


def round_summary_prompt(config: PromptConfig) -> str:
    return _pick(config.previous_round_summary_prompt, ROUND_SUMMARY_PROMPT)


def large_message_prompt(config: PromptConfig) -> str:
    return _pick(config.current_round_large_message_prompt, LARGE_MESSAGE_PROMPT)


def current_round_prompt(config: PromptConfig) -> str:
    return _pick(config.current_round_compress_prompt, CURRENT_ROUND_PROMPT)
