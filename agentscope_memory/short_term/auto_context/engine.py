"""The AutoContextMemory algorithm of AgentScope-Java 1.0.12 (reference/autocontext.md §6-§13).

`Compressor.compress_if_needed(state)` checks the trigger and runs the six strategies in order;
the first one that changes something wins. It edits `state` the way Java edits its fields, in
the same order, so that a summariser failure leaves exactly what Java leaves (parity profile).
The improved profile fixes three upstream bugs:
- Q7: offloads are recorded only after the summariser call succeeded (no orphans);
- tool calls and their results are never split: a tool run is cut only where every result has
  its call inside it, and the current-round compression never swallows results whose call it
  leaves behind;
- Q3: an offload stub (a message already carrying `_compress_meta`) is never offloaded again.
It also makes far fewer summariser calls (Java's strategy 6 re-summarises the current round on
every check once over the threshold):
- roll-up: strategy 4 summarises a contiguous run of earlier rounds in one call (the threshold
  applies to the run, not to each round); an earlier summary is never summarised again;
- a tool result the model has not read yet (no assistant message after it) is never compressed;
- strategy 6 only runs when the current round holds at least `min_compression_token_threshold`
  tokens, or half of `msg_threshold` messages, that are read and not yet summarised, so it does
  not re-summarise its own summary on every check.
"""

from __future__ import annotations

import copy
import math
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence

from agentscope_memory.llm import strip_thinking
from agentscope_memory.short_term.auto_context import prompts
from agentscope_memory.short_term.auto_context.config import IMPROVED, AutoContextConfig
from agentscope_memory.short_term.auto_context.tokens import char_count, estimate_tokens, utf16_len, utf16_slice
from agentscope_memory.message import ContentBlock, Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock, java_timestamp

COMPRESS_META = "_compress_meta"
CHAT_USAGE = "_chat_usage"

TOOL_INVOCATION_COMPRESS = "TOOL_INVOCATION_COMPRESS"
LARGE_MESSAGE_OFFLOAD_WITH_PROTECTION = "LARGE_MESSAGE_OFFLOAD_WITH_PROTECTION"
LARGE_MESSAGE_OFFLOAD = "LARGE_MESSAGE_OFFLOAD"
PREVIOUS_ROUND_CONVERSATION_SUMMARY = "PREVIOUS_ROUND_CONVERSATION_SUMMARY"
CURRENT_ROUND_LARGE_MESSAGE_SUMMARY = "CURRENT_ROUND_LARGE_MESSAGE_SUMMARY"
CURRENT_ROUND_MESSAGE_COMPRESS = "CURRENT_ROUND_MESSAGE_COMPRESS"

PLAN_TOOLS = frozenset({
    "create_plan", "update_plan_info", "revise_current_plan", "update_subtask_state", "finish_subtask",
    "view_subtasks", "get_subtask_count", "finish_plan", "view_historical_plans", "recover_historical_plan",
})


# -- data ------------------------------------------------------------------------------------


def _number(value: Any) -> float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


@dataclass
class CompressionEvent:
    """Java `CompressionEvent`."""

    event_type: str
    timestamp: int
    compressed_message_count: int
    previous_message_id: str | None
    next_message_id: str | None
    compressed_message_id: str | None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As Jackson writes it, derived getters included (they are ignored when read)."""
        before, after = _number(self.metadata.get("tokenBefore")), _number(self.metadata.get("tokenAfter"))
        return {
            "eventType": self.event_type,
            "timestamp": self.timestamp,
            "compressedMessageCount": self.compressed_message_count,
            "previousMessageId": self.previous_message_id,
            "nextMessageId": self.next_message_id,
            "compressedMessageId": self.compressed_message_id,
            "metadata": self.metadata,
            "tokenBefore": int(before),
            "tokenAfter": int(after),
            "tokenReduction": int(before - after),
            "compressInputToken": int(_number(self.metadata.get("inputToken"))),
            "compressOutputToken": int(_number(self.metadata.get("outputToken"))),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompressionEvent:
        metadata = data.get("metadata")
        return cls(
            event_type=str(data.get("eventType") or ""),
            timestamp=int(data.get("timestamp") or 0),
            compressed_message_count=int(data.get("compressedMessageCount") or 0),
            previous_message_id=data.get("previousMessageId"),
            next_message_id=data.get("nextMessageId"),
            compressed_message_id=data.get("compressedMessageId"),
            metadata=dict(metadata) if isinstance(metadata, dict) else {},
        )


@dataclass
class PlanSubtask:
    name: str
    state: str = "todo"


@dataclass
class PlanNote:
    """What the plan-aware hint reads from an AgentScope PlanNotebook's current plan."""

    description: str = ""
    expected_outcome: str = ""
    subtasks: list[PlanSubtask] = field(default_factory=list)

    def hint(self) -> str:
        lines = ""
        if self.description:
            lines += f"Goal: {self.description}\n"
        if self.subtasks:
            running = [s.name for s in self.subtasks if s.state.lower() == "in_progress"]
            if running:
                lines += f"Current Progress: {', '.join(running)}\n"
            done = sum(1 for s in self.subtasks if s.state.lower() == "done")
            lines += f"Progress: {done}/{len(self.subtasks)} subtasks completed\n"
        if self.expected_outcome:
            lines += f"Expected Outcome: {self.expected_outcome}\n"
        return f"<plan_aware_hint>\n{lines}\n</plan_aware_hint>"


@dataclass
class Summary:
    text: str
    # {"inputTokens", "outputTokens", "time"} as the model reported it, or None.
    usage: dict[str, Any] | None = None
    # Extra metadata for the summary message (marks a fallback summary).
    marker: dict[str, Any] | None = None


class Summarizer(Protocol):
    async def summarize(self, messages: list[Msg]) -> Summary: ...


@dataclass
class Identity:
    """Where new uuids, message ids and times come from; injectable for exact tests."""

    new_uuid: Callable[[], str] = field(default=lambda: str(uuid.uuid4()))
    new_id: Callable[[], str] = field(default=lambda: str(uuid.uuid4()))
    now_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))
    timestamp: Callable[[], str] = field(default=java_timestamp)


@dataclass
class ContextState:
    """What a compression reads and edits."""

    working: list[Msg]
    offload: dict[str, list[Msg]] = field(default_factory=dict)
    events: list[CompressionEvent] = field(default_factory=list)
    plan: PlanNote | None = None


class SummarizerError(Exception):
    """The summariser failed or gave nothing usable."""


# -- classifiers (MsgUtils) ----------------------------------------------------------------


def _has(msg: Msg, kind: type) -> bool:
    return any(isinstance(b, kind) for b in msg.content)


def is_tool_message(msg: Msg) -> bool:
    return msg.role is MsgRole.TOOL or _has(msg, ToolUseBlock) or _has(msg, ToolResultBlock)


def is_tool_use(msg: Msg) -> bool:
    return msg.role is MsgRole.ASSISTANT and _has(msg, ToolUseBlock)


def is_tool_result(msg: Msg) -> bool:
    return msg.role is MsgRole.TOOL or _has(msg, ToolResultBlock)


def is_compressed(msg: Msg) -> bool:
    return isinstance(msg.metadata.get(COMPRESS_META), dict)


def is_final_answer(msg: Msg) -> bool:
    if msg.role is not MsgRole.ASSISTANT:
        return False
    meta = msg.metadata.get(COMPRESS_META)
    if isinstance(meta, dict) and meta.get("compressed_current_round") is True:
        return False
    return not _has(msg, ToolUseBlock) and not _has(msg, ToolResultBlock)


def _last_index(msgs: list[Msg], test: Callable[[Msg], bool]) -> int:
    for i in range(len(msgs) - 1, -1, -1):
        if test(msgs[i]):
            return i
    return -1


def filter_plan_calls(msgs: list[Msg]) -> list[Msg]:
    """Java `filterPlanRelatedToolCalls`: the summariser never sees plan bookkeeping."""
    plan_ids = {
        b.id for m in msgs if m.role is MsgRole.ASSISTANT
        for b in m.content if isinstance(b, ToolUseBlock) and b.name in PLAN_TOOLS
    }
    out = []
    for m in msgs:
        uses = [b for b in m.content if isinstance(b, ToolUseBlock)]
        if m.role is MsgRole.ASSISTANT and uses and all(b.name in PLAN_TOOLS for b in uses):
            continue
        if m.role is MsgRole.TOOL and any(isinstance(b, ToolResultBlock) and b.id in plan_ids for b in m.content):
            continue
        out.append(m)
    return out


def interaction_messages(original: list[Msg]) -> list[Msg]:
    """Java `getInteractionMsgs`: every USER message and final assistant response."""
    return [m for m in original if m.role is MsgRole.USER or is_final_answer(m)]


# -- the algorithm ----------------------------------------------------------------------------


class Compressor:
    def __init__(
        self,
        config: AutoContextConfig,
        summarizer: Summarizer,
        identity: Identity | None = None,
    ) -> None:
        self.config = config
        self.summarizer = summarizer
        self.identity = identity or Identity()
        self.improved = config.profile == IMPROVED

    # Decisions always use Java's estimate, so triggers fire where Java's do; a real tokenizer
    # only reports (AutoContextService).
    @staticmethod
    def estimate(msgs: list[Msg]) -> int:
        return estimate_tokens(msgs)

    def triggered(self, count: int, tokens: int) -> bool:
        return count >= self.config.msg_threshold or tokens >= self.config.token_threshold

    async def compress_if_needed(self, state: ContextState) -> bool:
        if not self.triggered(len(state.working), self.estimate(state.working)):
            return False
        if await self._s1_tool_runs(state):
            return True
        cur = list(state.working)
        if self._offload_large(state, cur, protect=True) or self._offload_large(state, cur, protect=False):
            state.working = cur
            return True
        for strategy in (self._s4_previous_rounds, self._s5_large_current, self._s6_current_round):
            cur = list(state.working)
            if await strategy(state, cur):
                state.working = cur
                return True
        return False

    # -- helpers ----------------------------------------------------------------------------

    def _tag(self, u: str) -> str:
        return prompts.OFFLOAD_TAG.format(u)

    def _new_msg(self, role: MsgRole | None, name: str | None, content: list, metadata: dict[str, Any]) -> Msg:
        return Msg(self.identity.new_id(), name, role, content, metadata, self.identity.timestamp())

    def _record(self, state: ContextState, kind: str, msgs: list[Msg], start: int, end: int,
                compressed_id: str | None, metadata: dict[str, Any]) -> None:
        state.events.append(CompressionEvent(
            kind,
            self.identity.now_ms(),
            end - start + 1,
            msgs[start - 1].id if start > 0 else None,
            msgs[end + 1].id if end + 1 < len(msgs) else None,
            compressed_id,
            dict(metadata),
        ))

    @staticmethod
    def _usage_meta(usage: dict[str, Any] | None) -> dict[str, Any]:
        if not usage:
            return {}
        return {"inputToken": usage.get("inputTokens", 0), "outputToken": usage.get("outputTokens", 0),
                "time": float(usage.get("time", 0.0))}

    @staticmethod
    def _chat_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
        if not usage:
            return None
        inp, out, t = int(usage.get("inputTokens", 0)), int(usage.get("outputTokens", 0)), float(usage.get("time", 0.0))
        if inp <= 0 and out <= 0 and t <= 0:
            return None
        return {"inputTokens": inp, "outputTokens": out, "time": t, "totalTokens": inp + out}

    async def _summarize(self, state: ContextState, prompt: str, payload: list[Msg], extra: Sequence[Msg] = ()) -> Summary:
        envelope = [Msg(self.identity.new_id(), "user", MsgRole.USER, [TextBlock(prompt)], {}, self.identity.timestamp())]
        envelope += payload
        envelope.append(Msg(self.identity.new_id(), "user", MsgRole.USER, [TextBlock(prompts.END_MARKER)], {},
                            self.identity.timestamp()))
        envelope += list(extra)
        if state.plan is not None:
            envelope.append(Msg(self.identity.new_id(), "user", MsgRole.USER, [TextBlock(state.plan.hint())], {},
                                self.identity.timestamp()))
        summary = await self.summarizer.summarize(envelope)
        if summary is None or summary.text is None:
            # Java fails with a NullPointerException on an empty response (Q8).
            raise SummarizerError("the summariser returned no text")
        if self.improved:
            # Parity stores the answer as Java does, a reasoning model's <think> block and all
            # (byte for byte). Improved takes the thought out: the agent reads the summary back as
            # context, the very room compression was to save, and a thought is no summary.
            text = strip_thinking(summary.text)
            if not text:
                raise SummarizerError("the summariser returned nothing but its thinking")
            summary = replace(summary, text=text)
        return summary

    def _summary_msg(self, u: str, summary: Summary, separator: str, current_round: bool = False) -> Msg:
        meta: dict[str, Any] = {"offloaduuid": u}
        if current_round:
            meta["compressed_current_round"] = True
        metadata: dict[str, Any] = {COMPRESS_META: meta}
        usage = self._chat_usage(summary.usage)
        if usage is not None:
            metadata[CHAT_USAGE] = usage
        metadata.update(summary.marker or {})
        return self._new_msg(MsgRole.ASSISTANT, "assistant",
                             [TextBlock(summary.text + separator + self._tag(u))], metadata)

    async def _offload_and_summarize(self, state: ContextState, src: list[Msg], prompt: str,
                                     payload: list[Msg], extra: Sequence[Msg] = ()) -> tuple[str, Summary]:
        u = self.identity.new_uuid()
        if not self.improved:
            state.offload[u] = list(src)  # Java offloads before the call (Q7)
        summary = await self._summarize(state, prompt, payload, extra)
        if self.improved:
            state.offload[u] = list(src)
        return u, summary

    # -- strategy 1 -------------------------------------------------------------------------

    def _find_tool_run(self, msgs: list[Msg], cursor: int) -> tuple[int, int] | None:
        cfg = self.config
        if len(msgs) < cfg.last_keep:
            return None
        la = _last_index(msgs, is_final_answer)
        if la < 0:
            return None
        end = min(la, len(msgs) - cfg.last_keep)
        start = -1
        for i in range(max(0, cursor), max(end, 0)):
            if is_tool_message(msgs[i]):
                if start < 0:
                    start = i
                continue
            if start >= 0:
                run = self._trim(msgs, start, i - 1, strict=False)
                start = -1
                if run is not None:
                    return run
        if start >= 0:
            return self._trim(msgs, start, end - 1, strict=True)
        return None

    def _trim(self, msgs: list[Msg], a: int, b: int, strict: bool) -> tuple[int, int] | None:
        limit = self.config.min_consecutive_tool_messages
        if b - a + 1 <= limit:
            return None
        while a <= b and not is_tool_use(msgs[a]):
            if not is_tool_result(msgs[a]):
                if strict:
                    return None
                break
            a += 1
        while b >= a and not is_tool_result(msgs[b]):
            if not is_tool_use(msgs[b]):
                if strict:
                    return None
                break
            b -= 1
        if self.improved:
            run = self._paired(msgs, a, b)
            if run is None:
                return None
            a, b = run
        if a <= b and b - a + 1 > limit:
            return a, b
        return None

    @staticmethod
    def _paired(msgs: list[Msg], a: int, b: int) -> tuple[int, int] | None:
        """Shrink [a, b] from the end until every tool result inside has its call inside and
        every call inside has all its results inside (improved profile)."""
        while a <= b:
            calls = {blk.id for m in msgs[a:b + 1] for blk in m.content if isinstance(blk, ToolUseBlock)}
            results = {blk.id for m in msgs[a:b + 1] for blk in m.content if isinstance(blk, ToolResultBlock)}
            later = {blk.id for m in msgs[b + 1:] for blk in m.content if isinstance(blk, ToolResultBlock)}
            if results <= calls and not (calls & later):
                return a, b
            b -= 1
        return None

    async def _s1_tool_runs(self, state: ContextState) -> bool:
        cursor, changed = 0, False
        for _ in range(5):
            msgs = list(state.working)
            run = self._find_tool_run(msgs, cursor)
            if run is None:
                break
            a, b = run
            src = msgs[a:b + 1]
            if self.estimate(src) < self.config.min_compression_token_threshold:
                cursor = b + 1
                continue
            u, summary = await self._offload_and_summarize(
                state, src, prompts.tool_compress_prompt(self.config.custom_prompt), filter_plan_calls(src))
            replacement = self._summary_msg(u, summary, "\n")
            self._record(state, TOOL_INVOCATION_COMPRESS, msgs, a, b, replacement.id,
                         self._usage_meta(summary.usage))
            msgs[a:b + 1] = [replacement]
            state.working = msgs  # committed before any later group is tried, as in Java
            changed = True
            cursor = a + 1
        return changed

    # -- strategies 2 and 3 -----------------------------------------------------------------

    def _preview(self, text: str) -> str:
        n = self.config.offload_single_preview
        return utf16_slice(text, n) + "..." if utf16_len(text) > n else text

    def _offload_large(self, state: ContextState, cur: list[Msg], protect: bool) -> bool:
        cfg = self.config
        if len(cur) < cfg.last_keep:
            return False
        la = _last_index(cur, is_final_answer)
        if protect:
            p = max(0, len(cur) - cfg.last_keep)
            end = min(la, p) if la >= 0 else p
        else:
            end = la if la >= 0 else 0
        kind = LARGE_MESSAGE_OFFLOAD_WITH_PROTECTION if protect else LARGE_MESSAGE_OFFLOAD
        changed = False
        for i in range(end - 1, -1, -1):
            msg = cur[i]
            if is_tool_use(msg):
                continue
            if self.improved and is_compressed(msg):
                continue  # Q3: a stub is never offloaded again
            if is_tool_result(msg):
                block = next((b for b in msg.content if isinstance(b, ToolResultBlock)), None)
                if block is None:
                    continue
                out = "\n".join(b.text for b in block.output if isinstance(b, TextBlock))
                if utf16_len(out) <= cfg.large_payload_threshold:
                    continue
                u = self.identity.new_uuid()
                state.offload[u] = [msg]
                content: list[ContentBlock] = [ToolResultBlock(block.id, block.name,
                                           [TextBlock(self._preview(out) + "\n" + self._tag(u))],
                                           dict(block.metadata))]
                if self.improved:
                    # Java keeps only the first result; every call keeps its result here, or an
                    # OpenAI-style API refuses the history (a call without a result).
                    content += _companion_results(msg, block, f"Offloaded together with the result of {block.id}. {self._tag(u)}")
            else:
                text = msg.text_content
                if utf16_len(text) <= cfg.large_payload_threshold:
                    continue
                u = self.identity.new_uuid()
                state.offload[u] = [msg]
                content = [TextBlock(self._preview(text) + "\n" + self._tag(u))]
            replacement = self._new_msg(msg.role, msg.name, content, {COMPRESS_META: {"offloaduuid": u}})
            self._record(state, kind, cur, i, i, None, {
                "inputToken": self.estimate([msg]), "outputToken": self.estimate([replacement]), "time": 0.0})
            cur[i] = replacement
            changed = True
        return changed

    # -- strategy 4 -------------------------------------------------------------------------

    async def _s4_previous_rounds(self, state: ContextState, cur: list[Msg]) -> bool:
        la = _last_index(cur, is_final_answer)
        if la < 0:
            return False
        pairs: list[tuple[int, int]] = []
        u = -1
        for i in range(la):
            if cur[i].role is MsgRole.USER:
                u = i
            elif is_final_answer(cur[i]) and u >= 0:
                if i - u != 1:
                    pairs.append((u, i))
                u = -1
        if self.improved:
            return await self._s4_roll_up(state, cur, pairs)
        changed = False
        for user, answer in reversed(pairs):
            src = cur[user:answer + 1]
            if self.estimate(src) < self.config.min_compression_token_threshold:
                continue
            uid, summary = await self._offload_and_summarize(
                state, src, prompts.round_summary_prompt(self.config.custom_prompt), filter_plan_calls(src))
            replacement = self._summary_msg(uid, summary, "\n")
            self._record(state, PREVIOUS_ROUND_CONVERSATION_SUMMARY, cur, user + 1, answer, replacement.id,
                         self._usage_meta(summary.usage))
            cur[user + 1:answer + 1] = [replacement]
            changed = True
        return changed

    async def _s4_roll_up(self, state: ContextState, cur: list[Msg], pairs: list[tuple[int, int]]) -> bool:
        """Improved strategy 4: each contiguous run of uncompressed rounds becomes one summary
        (one call), placed after the run's first user message. A round already summarised has
        its user message right before its summary, so it is never part of a run: earlier
        summaries stay as they are and are rolled up beside, not into, the new one."""
        runs: list[list[tuple[int, int]]] = []
        for pair in pairs:
            if runs and runs[-1][-1][1] + 1 == pair[0]:
                runs[-1].append(pair)
            else:
                runs.append([pair])
        changed = False
        for run in reversed(runs):
            first, last = run[0][0], run[-1][1]
            src = cur[first:last + 1]
            if self.estimate(src) < self.config.min_compression_token_threshold:
                continue
            uid, summary = await self._offload_and_summarize(
                state, src, prompts.round_summary_prompt(self.config.custom_prompt), filter_plan_calls(src))
            replacement = self._summary_msg(uid, summary, "\n")
            self._record(state, PREVIOUS_ROUND_CONVERSATION_SUMMARY, cur, first + 1, last, replacement.id,
                         self._usage_meta(summary.usage))
            cur[first + 1:last + 1] = [replacement]
            changed = True
        return changed

    # -- strategy 5 -------------------------------------------------------------------------

    async def _s5_large_current(self, state: ContextState, cur: list[Msg]) -> bool:
        lu = _last_index(cur, lambda m: m.role is MsgRole.USER)
        if lu < 0 or lu == len(cur) - 1:
            return False
        limit = self.config.large_payload_threshold
        unread = _first_unread(cur) if self.improved else len(cur)
        changed = False
        for i in range(len(cur) - 1, lu, -1):
            msg = cur[i]
            if is_compressed(msg) or i >= unread:
                continue
            text = msg.text_content
            large = utf16_len(text) > limit if text else char_count(msg) > limit
            if not large:
                continue
            if _has(msg, ToolUseBlock):
                payload = msg if not text else Msg(msg.id, msg.name, msg.role, [TextBlock(text)], {}, msg.timestamp)
            elif _has(msg, ToolResultBlock):
                out = "\n".join(b.text for r in msg.content if isinstance(r, ToolResultBlock)
                                for b in r.output if isinstance(b, TextBlock))
                payload = msg if not out else Msg(msg.id, msg.name, msg.role, [TextBlock(out)], {}, msg.timestamp)
            else:
                payload = msg
            u, summary = await self._offload_and_summarize(
                state, [msg], prompts.large_message_prompt(self.config.custom_prompt), [payload])
            final = summary.text + self._tag(u)
            metadata = copy.deepcopy(msg.metadata)
            metadata[COMPRESS_META] = {"offloaduuid": u}
            usage = self._chat_usage(summary.usage)
            if usage is not None:
                metadata[CHAT_USAGE] = usage
            metadata.update(summary.marker or {})
            content = self._rewrite_content(msg, final, self.improved)
            replacement = self._new_msg(msg.role, msg.name, content, metadata)
            self._record(state, CURRENT_ROUND_LARGE_MESSAGE_SUMMARY, cur, i, i, replacement.id,
                         self._usage_meta(summary.usage))
            cur[i] = replacement
            changed = True
        return changed

    @staticmethod
    def _rewrite_content(msg: Msg, final: str, improved: bool) -> list:
        out: list[ContentBlock]
        if _has(msg, ToolUseBlock):
            out, placed = [], False
            for block in msg.content:
                if isinstance(block, TextBlock):
                    if not placed:
                        out.append(TextBlock(final))
                        placed = True
                    continue
                out.append(block)
            if not placed and final:
                out.insert(0, TextBlock(final))
            return out
        if _has(msg, ToolResultBlock):
            out, placed = [], False
            first: ToolResultBlock | None = None
            for block in msg.content:
                if isinstance(block, ToolResultBlock):
                    if not placed:
                        out.append(ToolResultBlock(block.id, block.name, [TextBlock(final)], dict(block.metadata)))
                        placed, first = True, block
                    elif improved:
                        # Java drops the other results; each call keeps one here (OpenAI's rule).
                        out.append(ToolResultBlock(block.id, block.name, [TextBlock(
                            f"Summarised together with the result of {first.id if first else ''}.")], dict(block.metadata)))
                    continue
                out.append(block)
            return out
        return [TextBlock(final)]

    # -- strategy 6 -------------------------------------------------------------------------

    async def _s6_current_round(self, state: ContextState, cur: list[Msg]) -> bool:
        lu = _last_index(cur, lambda m: m.role is MsgRole.USER)
        if lu < 0 or lu == len(cur) - 1:
            return False
        a, b = lu + 1, len(cur) - 1
        if is_tool_use(cur[b]):
            b -= 1
        if self.improved:
            # Never swallow results whose call stays behind, nor a call whose results stay.
            b = min(b, _first_unread(cur) - 1)  # never compress what the model has not read
            run = self._paired(cur, a, b) if a <= b else None
            if run is None:
                return False
            a, b = run
            fresh = [m for m in cur[a:b + 1] if not is_compressed(m)]
            if (self.estimate(fresh) < self.config.min_compression_token_threshold
                    and len(fresh) < max(1, self.config.msg_threshold // 2)):
                # Too little new material (in tokens and in messages): a call would mostly
                # re-summarise the previous summary.
                return False
        if b < a:
            return False
        src = cur[a:b + 1]
        filtered = filter_plan_calls(src)
        ratio = self.config.current_round_compression_ratio
        orig = sum(char_count(m) for m in filtered)
        pct = math.floor(ratio * 100 + 0.5)
        target = math.floor(orig * ratio + 0.5)
        requirement = Msg(self.identity.new_id(), "user", MsgRole.USER,
                          [TextBlock(prompts.CHAR_REQUIREMENT.format(orig=orig, target=target, pct=pct))], {},
                          self.identity.timestamp())
        u, summary = await self._offload_and_summarize(
            state, src, prompts.current_round_prompt(self.config.custom_prompt), filtered, [requirement])
        replacement = self._summary_msg(u, summary, "", current_round=True)
        self._record(state, CURRENT_ROUND_MESSAGE_COMPRESS, cur, a, b, replacement.id, self._usage_meta(summary.usage))
        cur[a:b + 1] = [replacement]
        return True


def _first_unread(msgs: list[Msg]) -> int:
    """The index of the first tool result after the last assistant message (the model has not
    reasoned over it yet), or len(msgs) when every result has been read."""
    i = len(msgs)
    while i > 0 and is_tool_result(msgs[i - 1]) and msgs[i - 1].role is not MsgRole.ASSISTANT:
        i -= 1
    return i


def _companion_results(msg: Msg, first: ToolResultBlock, text: str) -> list[ContentBlock]:
    """The tool results of `msg` after `first`, each reduced to `text` (improved profile)."""
    return [ToolResultBlock(b.id, b.name, [TextBlock(text)], dict(b.metadata))
            for b in msg.content if isinstance(b, ToolResultBlock) and b is not first]
