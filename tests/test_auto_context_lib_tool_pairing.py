"""The improved profile never hands a model a history that an OpenAI-style API refuses: after
any strategy, every tool call of an assistant message is answered by the tool results right
after it, and no tool result answers a call that is not there. (The parity profile keeps
AgentScope-Java 1.0.12's behaviour, which breaks the rule; the test shows the validator sees it.)"""

from __future__ import annotations

import random

from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock
from auto_context_helpers import compressor, state

SEEDS = 300


def openai_pairing_errors(msgs: list[Msg]) -> list[str]:
    """OpenAI's chat rule: an assistant message with tool_calls must be followed by tool messages
    answering each tool_call_id, before any other message; a tool message must answer a call of
    the assistant message it follows. (AgentScope's formatters send each ToolResultBlock as one
    tool message.)"""
    errors: list[str] = []
    waiting: set[str] | None = None
    for i, msg in enumerate(msgs):
        results = [b.id for b in msg.content if isinstance(b, ToolResultBlock)]
        if results:
            for result in results:
                if waiting is None or result not in waiting:
                    errors.append(f"message {i}: result {result} answers no open call")
                else:
                    waiting.discard(result)
            continue
        if waiting:
            errors.append(f"message {i}: calls {sorted(waiting)} have no result")
        calls = [b.id for b in msg.content if isinstance(b, ToolUseBlock)]
        waiting = set(calls) if msg.role is MsgRole.ASSISTANT and calls else None
    if waiting:
        errors.append(f"end: calls {sorted(waiting)} have no result")
    return errors


def conversation(rnd: random.Random) -> list[Msg]:
    msgs: list[Msg] = []
    n = 0
    for turn in range(rnd.randint(1, 4)):
        msgs.append(Msg.create(MsgRole.USER, f"question {turn} " + "问" * rnd.choice([5, 50, 400])))
        for _ in range(rnd.randint(0, 4)):
            ids = [f"call_{n + k}" for k in range(rnd.randint(1, 3))]
            n += len(ids)
            msgs.append(Msg.create(MsgRole.ASSISTANT, name="assistant",
                                   content=[ToolUseBlock(i, "search", {"q": i}, None, {}) for i in ids]))
            results = [ToolResultBlock(i, "search", [TextBlock(f"result of {i} " + "x" * rnd.choice([10, 100, 900]))], {})
                       for i in ids]
            if rnd.random() < 0.5:  # all results in one TOOL message, as some agents store them
                msgs.append(Msg.create(MsgRole.TOOL, name="assistant", content=results))
            else:
                msgs += [Msg.create(MsgRole.TOOL, name="assistant", content=[r]) for r in results]
        msgs.append(Msg.create(MsgRole.ASSISTANT, f"answer {turn} " + "答" * rnd.choice([5, 300])))
    return msgs


async def _broken_histories(profile: str) -> tuple[int, int, list[str]]:
    compressed = broken = 0
    first: list[str] = []
    for seed in range(1, SEEDS + 1):
        rnd = random.Random(seed)
        msgs = conversation(rnd)
        assert openai_pairing_errors(msgs) == []
        c, _ = compressor(
            profile=profile,
            msg_threshold=rnd.randint(3, 12), last_keep=rnd.randint(1, 6),
            min_consecutive_tool_messages=rnd.randint(1, 4), large_payload_threshold=rnd.randint(60, 500),
            offload_single_preview=rnd.randint(10, 120), min_compression_token_threshold=0,
            max_token=rnd.choice([300, 800, 2000, 131072]),
            current_round_compression_ratio=rnd.choice([0.1, 0.3, 0.5, 0.8]),
        )
        st = state(msgs)
        for _ in range(rnd.randint(1, 3)):
            if await c.compress_if_needed(st):
                compressed += 1
                errors = openai_pairing_errors(st.working)
                if errors:
                    broken += 1
                    first = first or [f"seed {seed}"] + errors
    return compressed, broken, first


async def test_the_improved_profile_keeps_every_tool_call_paired() -> None:
    compressed, broken, first = await _broken_histories("improved")
    assert compressed >= SEEDS // 2  # the histories exercise the strategies
    assert broken == 0, first


async def test_the_validator_sees_the_parity_profiles_broken_histories() -> None:
    compressed, broken, _ = await _broken_histories("parity")
    assert compressed >= SEEDS // 2 and broken > 0
