"""AgentScope-Python 2.x: the agent's context compression delegated to the server.

    from agentscope_memory.agentscope_adapters.v2_context import RemoteContextCompression

    compression = RemoteContextCompression("127.0.0.1:50051", api_key="...")
    agent = Agent(..., middlewares=[compression], toolkit=Toolkit(tools=await compression.list_tools()))

A 2.x `Agent` compresses its own context before every reasoning step (`compress_context`).
This middleware takes that step over (`on_compress_context`; AgentScope's own summarising is
not run): it sends the context the server has not seen yet to an AUTO_CONTEXT memory of the
agent's session, lets the server compress it (`PrepareReasoningInput`: the memory's profile,
thresholds, offloads, events, inspector), and makes `agent.state.context` the server's working
history. Messages the server kept stay the agent's own `Msg` objects; what the server wrote
(summaries, offload stubs) becomes 2.x messages, and the `context_reload` tool brings back
what an offload marker stands for.

The server sees a 2.x message the way AgentScope-Java writes it, which its strategies expect:
a reply's blocks are cut into an assistant message per run of text/thinking/tool calls and a
TOOL message per tool result. Each piece carries its blocks' 2.x JSON and its message's fields,
so a process that has only the memory rebuilds the messages whole.

What the server has is tracked per block in `agent.state.middle_context["agentscope_memory"]`,
so an agent state saved and loaded (`v2_state`) goes on without sending its history again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from agentscope_memory.agentscope_adapters.per_loop import PerLoop
from agentscope_memory.client import AsyncAutoContextClient
from agentscope_memory.client._common import DEFAULT_TARGET
from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.validation.ids import check_id
from agentscope_memory.message import (
    AudioBlock,
    Base64Source,
    ContentBlock,
    ImageBlock,
    Msg,
    MsgRole,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLSource,
    VideoBlock,
)
from agentscope_memory.short_term.auto_context.config import IMPROVED, AutoContextConfig
from agentscope_memory.short_term.auto_context.prompts import HOOK_INSTRUCTION

logger = logging.getLogger(__name__)

# Where the middleware keeps, in the agent state, which memory it uses and what it has sent.
STATE_KEY = "agentscope_memory"
# Where a stored message keeps the 2.x blocks it carries and their message's fields.
METADATA_KEY = "agentscope2"
# The server's mark of a message it rewrote (engine.COMPRESS_META).
_COMPRESSED = "_compress_meta"
# At most this much goes in one AddMessages call (a stock server takes 1000 messages, 32 MiB).
ADD_BATCH_MESSAGES = 500
ADD_BATCH_BYTES = 8 * 1024 * 1024
# At most this much text goes in one piece (a stock server stores messages up to 4 MiB): a longer
# block is sent cut (the agent's own context keeps it whole).
PIECE_TEXT_BYTES = 3 * 1024 * 1024
TOOL_NAME = "context_reload"
TOOL_DESCRIPTION = ("Bring back the original messages that context compression replaced, given the UUID shown in a "
                    "compressed message's offload tag. Use it when the full details of earlier tool calls or long "
                    "messages are needed.")
PARAMETER_DESCRIPTION = "The UUID from the offload tag of a compressed message"
BLANK_UUID_TEXT = "Error: UUID cannot be null or empty."
# How many times a send reads what the memory received and tries again when another process
# sent some of the same blocks at the same moment (see `_request_id`).
SEND_ATTEMPTS = 4


def default_memory_id(agent_name: str, session_id: str) -> str:
    """The memory of an agent's session when none is given: one per agent name and session,
    `agentscope2/<name>/<session>`; when that is no memory id (over 256 bytes, a control
    character: 2.x takes any session id), `agentscope2/` and a digest of the two, which the
    server takes."""
    readable = f"agentscope2/{agent_name}/{session_id}"
    try:
        return check_id(readable, "memory_id")
    except InvalidArgumentError:
        named = json.dumps([agent_name, session_id]).encode()  # ASCII: lone surrogates escaped
        return f"agentscope2/{hashlib.sha256(named).hexdigest()}"


# -- 2.x blocks -> the server's messages --------------------------------------------------------


def block_key(block: Any) -> str:
    # A tool call and its result share an id: the type tells them apart.
    return f"{block.type}:{block.id}"


def _identity(msg: Any, block: Any) -> str:
    return f"{msg.id}/{block_key(block)}"


def _media(block: Any) -> ContentBlock:
    source = block.source
    media_type = str(getattr(source, "media_type", ""))
    made: URLSource | Base64Source = (Base64Source(media_type, source.data) if source.type == "base64"
                                      else URLSource(str(source.url)))
    if media_type.startswith("image/"):
        return ImageBlock(made)
    if media_type.startswith("audio/"):
        return AudioBlock(made)
    if media_type.startswith("video/"):
        return VideoBlock(made)
    return TextBlock(f"[{media_type or 'data'}{': ' + block.name if block.name else ''}]")


def _output(value: Any) -> list[ContentBlock]:
    if isinstance(value, str):
        return [TextBlock(value)]
    return [TextBlock(b.text) if b.type == "text" else _media(b) for b in value]


def _to_library(block: Any) -> ContentBlock:
    kind = block.type
    if kind == "text":
        return TextBlock(block.text)
    if kind == "thinking":
        return ThinkingBlock(block.thinking)
    if kind == "hint":
        hint = block.hint
        return TextBlock(hint if isinstance(hint, str) else "\n".join(b.text for b in hint if b.type == "text"))
    if kind == "tool_call":
        try:
            parsed = json.loads(block.input) if block.input else {}
        except ValueError:
            parsed = None
        return ToolUseBlock(block.id, block.name, parsed if isinstance(parsed, dict) else {}, block.input)
    if kind == "tool_result":
        return ToolResultBlock(block.id, block.name, _output(block.output))
    if kind == "data":
        return _media(block)
    return TextBlock("")


_ROLES = {"user": MsgRole.USER, "assistant": MsgRole.ASSISTANT, "system": MsgRole.SYSTEM}


def _runs(blocks: Sequence[Any]) -> list[list[Any]]:
    """Java's shape of a 2.x message: each tool result alone, the blocks between them together."""
    runs: list[list[Any]] = []
    for block in blocks:
        if block.type == "tool_result":
            runs.append([block])
        elif runs and runs[-1][0].type != "tool_result":
            runs[-1].append(block)
        else:
            runs.append([block])
    return runs


# The field of a 2.x block holding the text its library block carries too, by block type.
_TEXT_FIELDS = {"text": "text", "thinking": "thinking", "hint": "hint", "tool_call": "input", "tool_result": "output"}
# Set in a block's stored 2.x JSON in place of that field (whose text the library block holds).
_ELIDED = "_agentscope_memory_elided"
# The one argument of a tool call too large to send twice (`_fit`): the arguments as the model
# wrote them (cut when beyond the limit).
_RAW_ARGUMENTS = "agentscope_memory_raw_arguments"


def _carried(block: ContentBlock) -> str | None:
    """The text a library block carries of its 2.x block's text field."""
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ThinkingBlock):
        return block.thinking
    if isinstance(block, ToolUseBlock):
        cut = block.input.get(_RAW_ARGUMENTS) if block.content is None else None
        return cut if isinstance(cut, str) else block.content
    if isinstance(block, ToolResultBlock) and len(block.output) == 1 and isinstance(block.output[0], TextBlock):
        return block.output[0].text
    return None


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", errors="ignore")
    return f"{kept}\n[{len(text) - len(kept)} more characters not sent: beyond what one message holds on the server]"


def _fit(block: ContentBlock, limit: int) -> ContentBlock:
    """`block` with its text cut to `limit` bytes: the server stores no message beyond 4 MiB,
    and one it refuses would hold back every later compression of the agent."""
    if isinstance(block, TextBlock):
        return TextBlock(_cut(block.text, limit))
    if isinstance(block, ThinkingBlock):
        return ThinkingBlock(_cut(block.thinking, limit))
    if isinstance(block, ToolResultBlock) and len(block.output) == 1 and isinstance(block.output[0], TextBlock):
        return ToolResultBlock(block.id, block.name, [TextBlock(_cut(block.output[0].text, limit))])
    if isinstance(block, ToolUseBlock) and block.content is not None and len(block.content.encode()) * 2 > limit:
        # A call carries its arguments twice (parsed, for the token estimate, and as the model
        # wrote them): a large one is sent once, as written (cut when beyond the limit).
        return ToolUseBlock(block.id, block.name, {_RAW_ARGUMENTS: _cut(block.content, limit)}, None)
    return block


def _dump(block: Any, library: ContentBlock) -> dict[str, Any]:
    """A block's 2.x JSON without the text its library block carries already (`_undump` puts it
    back), so that a stored piece is about as large as its text, not twice: a message beyond
    half the server's per-message limit could not be sent, and held every compression back."""
    dumped: dict[str, Any] = block.model_dump(mode="json")
    name = _TEXT_FIELDS.get(block.type)
    if name is not None and isinstance(dumped.get(name), str) and dumped[name] == _carried(library):
        del dumped[name]
        dumped[_ELIDED] = name
    return dumped


def _undump(dumped: dict[str, Any], library: ContentBlock | None) -> dict[str, Any]:
    name = dumped.get(_ELIDED)
    if name is None:
        return dumped
    restored = {k: v for k, v in dumped.items() if k != _ELIDED}
    restored[name] = (_carried(library) if library is not None else None) or ""
    return restored


def _parts(msg: Any, blocks: Sequence[Any]) -> list[Msg]:
    """The server messages carrying `blocks` (consecutive blocks of `msg` the server lacks)."""
    header = msg.model_dump(mode="json", exclude={"content"})
    out = []
    for run in _runs(blocks):
        part_id = _identity(msg, run[0])
        role = MsgRole.TOOL if run[0].type == "tool_result" else _ROLES.get(msg.role, MsgRole.USER)
        library = [_to_library(b) for b in run]
        # The 2.x JSON leaves out the text the library block carries; a process rebuilding the
        # block from the memory takes it from the stored block, cut if it was.
        out.append(Msg(part_id, msg.name, role, [_fit(lb, PIECE_TEXT_BYTES // len(run)) for lb in library], {
            METADATA_KEY: {"msg": msg.id, "part": part_id, "keys": [_identity(msg, b) for b in run],
                           "blocks": [_dump(b, lb) for b, lb in zip(run, library, strict=True)], "header": header}}))
    return out


def _unsent(context: Sequence[Any], seen: set[str]) -> list[Msg]:
    out: list[Msg] = []
    for msg in context:
        pending: list[Any] = []
        for block in msg.content:
            if _identity(msg, block) in seen:
                if pending:
                    out += _parts(msg, pending)
                    pending = []
            else:
                pending.append(block)
        if pending:
            out += _parts(msg, pending)
    return out


def _size(msg: Msg) -> int:
    # The 2.x JSON, and the text the blocks carry beside it (left out of that JSON).
    carried = sum(len((_carried(b) or "").encode()) for b in msg.content)
    return len(json.dumps(msg.metadata.get(METADATA_KEY), ensure_ascii=False).encode()) + carried + 1024


def _batches(msgs: list[Msg]) -> list[list[Msg]]:
    batches: list[list[Msg]] = []
    size = 0
    for msg in msgs:
        if not batches or len(batches[-1]) >= ADD_BATCH_MESSAGES or size + _size(msg) > ADD_BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(msg)
        size += _size(msg)
    return batches


def _request_id(batch: Sequence[Msg]) -> str:
    """The AddMessages request id of a batch, named by its first block: two processes holding
    the same unsent blocks (one saved state loaded twice, going on at once) name their batches
    alike, so the server stores the blocks once. A batch that goes on differently gets the
    server's refusal of the reused id, and its sender reads what the memory received instead."""
    first = batch[0].metadata[METADATA_KEY]["keys"][0]
    return "agentscope2-" + hashlib.sha256(first.encode()).hexdigest()[:48]


def _received_keys(stored: Sequence[Msg]) -> set[str]:
    """The identities of the 2.x blocks in `stored` messages, compressed or not."""
    keys: set[str] = set()
    for msg in stored:
        info = msg.metadata.get(METADATA_KEY)
        if isinstance(info, dict) and isinstance(info.get("keys"), list):
            keys.update(str(k) for k in info["keys"])
    return keys


# -- the server's working history -> 2.x messages -----------------------------------------------


def _kept(stored: Msg) -> dict[str, Any] | None:
    """What a stored piece carries, when it is one this adapter sent and the server kept as is
    (a piece the server rewrote keeps the metadata under a new id, marked compressed)."""
    info = stored.metadata.get(METADATA_KEY)
    if not isinstance(info, dict) or stored.id != info.get("part") or _COMPRESSED in stored.metadata:
        return None
    return info


def _text(blocks: Sequence[ContentBlock]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


def _from_library(stored: Msg, assistant: bool) -> list[Any]:
    """2.x blocks for a message the server wrote (a summary, an offload stub, another client's).
    Their ids are derived from the stored message's, so they are the same blocks at every read."""
    from agentscope.message import TextBlock as Text, ThinkingBlock as Thinking
    from agentscope.message import ToolCallBlock as Call, ToolResultBlock as Result

    out: list[Any] = []
    for i, block in enumerate(stored.content):
        bid = f"{stored.id}#{i}"
        if isinstance(block, TextBlock):
            out.append(Text(id=bid, text=block.text))
        elif isinstance(block, ThinkingBlock) and assistant:
            out.append(Thinking(id=bid, thinking=block.thinking))
        elif isinstance(block, ToolUseBlock) and assistant:
            raw = block.content if block.content else json.dumps(block.input, ensure_ascii=False)
            out.append(Call(id=block.id or bid, name=block.name or "", input=raw, state="finished"))
        elif isinstance(block, ToolResultBlock) and assistant:
            out.append(Result(id=block.id or bid, name=block.name or "", output=_text(block.output), state="success"))
        elif isinstance(block, ToolResultBlock):
            out.append(Text(id=bid, text=_text(block.output)))
    if not out and stored.text_content:
        out.append(Text(id=f"{stored.id}#0", text=stored.text_content))
    return out


@dataclass
class _Group:
    origin: str | None  # the 2.x message id the blocks come from; None: a server message
    stored: Msg | None = None
    info: dict[str, Any] | None = None
    blocks: list[Any] = field(default_factory=list)


def _rebuild(working: Sequence[Msg], context: Sequence[Any]) -> list[Any]:
    from agentscope.message import Msg as Msg2

    own_blocks = {_identity(m, b): b for m in context for b in m.content}
    own_msgs: dict[str, Any] = {}
    for m in context:
        own_msgs.setdefault(m.id, m)
    infos = [_kept(w) for w in working]
    groups: list[_Group] = []
    for i, (stored, info) in enumerate(zip(working, infos, strict=True)):
        if info is not None:
            header = info.get("header") or {}
            blocks = []
            for j, (key, dumped) in enumerate(zip(info.get("keys") or [], info.get("blocks") or [], strict=False)):
                own = own_blocks.get(key)
                library = stored.content[j] if j < len(stored.content) else None
                blocks.append(own if own is not None else
                              Msg2.model_validate({**header, "content": [_undump(dumped, library)]}).content[0])
            if groups and groups[-1].origin == info["msg"]:
                groups[-1].blocks += blocks
            else:
                groups.append(_Group(info["msg"], stored, info, blocks))
            continue
        # An assistant or tool message the server wrote between two pieces of one reply, or
        # after its last piece (a summary or stub of some of its tool calls), stays inside that
        # reply, where 2.x keeps a reply's blocks (and appends the reply's next ones).
        following = next((n for n in infos[i + 1:] if n is not None), None)
        last = groups[-1] if groups else None
        assistant = stored.role not in (MsgRole.USER, MsgRole.SYSTEM)
        if (assistant and last is not None and last.origin is not None
                and (following is None or following["msg"] == last.origin)
                and (last.info or {}).get("header", {}).get("role") == "assistant"):
            last.blocks += _from_library(stored, assistant=True)
        else:
            groups.append(_Group(None, stored, None, _from_library(stored, assistant)))

    out: list[Any] = []
    for group in groups:
        if not group.blocks:
            continue
        if group.origin is None:
            assert group.stored is not None
            assistant = any(b.type != "text" for b in group.blocks) or group.stored.role not in (MsgRole.USER, MsgRole.SYSTEM)
            out.append(Msg2(id=group.stored.id, name=group.stored.name or ("assistant" if assistant else "user"),
                            role="assistant" if assistant else "user", content=group.blocks))
            continue
        own_msg = own_msgs.get(group.origin)
        if own_msg is not None and [id(b) for b in own_msg.content] == [id(b) for b in group.blocks]:
            out.append(own_msg)  # untouched: the agent's own object
        elif own_msg is not None:
            out.append(own_msg.model_copy(update={"content": group.blocks}))
        else:
            header = (group.info or {}).get("header") or {}
            out.append(Msg2.model_validate({**header, "content": group.blocks}))
    return out


def _offload_text(msgs: Sequence[Msg]) -> str:
    lines = []
    for msg in msgs:
        for block in msg.content:
            if isinstance(block, TextBlock):
                lines.append(block.text)
            elif isinstance(block, ToolUseBlock):
                lines.append(f"{block.name}({block.content or json.dumps(block.input, ensure_ascii=False)})")
            elif isinstance(block, ToolResultBlock):
                lines.append(_text(block.output))
    return "\n".join(line for line in lines if line)


# -- the middleware ------------------------------------------------------------------------------


class RemoteContextCompression:
    """A 2.x middleware (`on_compress_context`, `on_system_prompt`, `list_tools`) that hands the
    agent's context compression to an AUTO_CONTEXT memory on the server.

    - `memory_id`: the memory, or a function of the agent giving it; by default one per agent
      name and `agent.state.session_id` (`default_memory_id`). It is created on first use with
      `auto_context_config`, by default the improved profile triggering where the agent's own
      compression would (`max_token` = `model.context_size`, `token_ratio` =
      `context_config.trigger_ratio`); a memory that exists keeps its configuration.
    - The server decides when to compress: AgentScope's own summarising (and its
      `state.summary`) is not used, and a `CompressContext` tool call asks the server too.
      A summary the agent's state already holds stays where it is.
    - `raise_errors`: by default a failure (server unreachable, refused) is logged and the
      agent's context is left as it was, uncompressed; True raises it from `compress_context`.
    """

    def __init__(self, target: str = DEFAULT_TARGET, *, api_key: str | None = None,
                 memory_id: str | Callable[[Any], str] | None = None,
                 auto_context_config: AutoContextConfig | None = None, raise_errors: bool = False,
                 offload_instruction: bool = True, send_after_reply: bool = True, timeout: float = 30.0,
                 retries: int = 2) -> None:
        self._memory_id = memory_id
        self._config = auto_context_config
        self.raise_errors = raise_errors
        self.offload_instruction = offload_instruction
        self.send_after_reply = send_after_reply
        self._clients = PerLoop(functools.partial(AsyncAutoContextClient, target, api_key=api_key, timeout=timeout,
                                                  retries=retries))
        self._created: set[str] = set()
        # Per memory, what the server's system message adds to the agent's prompt.
        self._system: dict[str, list[str]] = {}

    # AgentScope asks each middleware which hooks it implements.
    _HOOKS = frozenset({"on_compress_context", "on_system_prompt", "on_reply"})

    def is_implemented(self, hook_name: str) -> bool:
        return hook_name in self._HOOKS and (hook_name != "on_system_prompt" or self.offload_instruction) and (
            hook_name != "on_reply" or self.send_after_reply)

    async def get_middleware_key(self) -> str:
        return STATE_KEY

    def memory_id_of(self, agent: Any) -> str:
        if callable(self._memory_id):
            return str(self._memory_id(agent))
        return self._memory_id or default_memory_id(agent.name, agent.state.session_id)

    def _config_for(self, agent: Any) -> AutoContextConfig:
        if self._config is not None:
            return self._config
        ratio = float(getattr(getattr(agent, "context_config", None), "trigger_ratio", 0.75))
        size = int(getattr(getattr(agent, "model", None), "context_size", 128 * 1024))
        return AutoContextConfig(max_token=size, token_ratio=min(max(ratio, 0.01), 1.0), profile=IMPROVED)

    async def on_compress_context(self, agent: Any, input_kwargs: dict[str, Any],
                                  next_handler: Callable[..., Any]) -> None:
        try:
            await self.compress(agent)
        except Exception:
            if self.raise_errors:
                raise
            logger.warning("agentscope-memory: compressing agent %r's context on the server failed; the context "
                           "is left as it was", getattr(agent, "name", "?"), exc_info=True)

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        # As AgentScope-Java's AutoContextHook: the model learns what an offload marker is, and
        # reads the memory's shared pools, as the server's system message holds them.
        added = self._system.get(self.memory_id_of(agent)) or [HOOK_INSTRUCTION]
        return "\n\n".join([current_prompt, *added] if current_prompt else added)

    async def on_reply(self, agent: Any, input_kwargs: dict[str, Any], next_handler: Callable[..., Any]) -> Any:
        async for item in next_handler(**input_kwargs):
            yield item
        # The reply's last answer is sent now, not at the next compression: the memory holds
        # the whole conversation between replies (for the inspector, other clients, a process
        # that starts from the memory alone).
        try:
            await self.send(agent)
        except Exception:
            if self.raise_errors:
                raise
            logger.warning("agentscope-memory: sending agent %r's reply to the server failed; it is sent with "
                           "the next compression", getattr(agent, "name", "?"), exc_info=True)

    async def _seen(self, client: AsyncAutoContextClient, agent: Any, memory_id: str) -> set[str]:
        """The identities of the agent's blocks the memory holds (see `_identity`)."""
        mine = agent.state.middle_context.get(STATE_KEY)
        seen: set[str] | None = None
        if isinstance(mine, dict) and mine.get("memory_id") == memory_id and isinstance(mine.get("seen"), list):
            seen = set(mine["seen"])
        if memory_id not in self._created:
            made = await client.create_memory(memory_id, self._config_for(agent), allow_existing=True)
            self._created.add(memory_id)
            if made.message_count == 0:
                seen = set()  # an empty memory (new, or cleared) has none of it
        if seen is None:
            # First use of this memory from this state: whatever the memory holds already is
            # not sent again (a state saved without this middleware's record, say).
            seen = {key for stored in await client.get_messages(memory_id)
                    for key in ((_kept(stored) or {}).get("keys") or [])}
        return seen

    async def send(self, agent: Any) -> int:
        """Sends the blocks of the agent's context the memory lacks; returns how many messages
        that took. Raises what failed."""
        try:
            return await self._send(agent)
        except NotFoundError:
            # Deleted by another client since this process made it: made again (empty, so it
            # is given the agent's whole context).
            self._created.discard(self.memory_id_of(agent))
            return await self._send(agent)

    async def _send(self, agent: Any) -> int:
        client = self._clients.get()
        memory_id = self.memory_id_of(agent)
        state = agent.state
        seen = await self._seen(client, agent, memory_id)
        sent = 0
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                for batch in _batches(_unsent(state.context, seen)):
                    await client.add_messages(memory_id, batch, request_id=_request_id(batch))
                    sent += len(batch)
                    # Recorded at once: a failure further on must not send these again.
                    for part in batch:
                        seen.update(part.metadata[METADATA_KEY]["keys"])
                    state.middle_context[STATE_KEY] = {"memory_id": memory_id, "seen": sorted(seen)}
                return sent
            except InvalidArgumentError as exc:
                if exc.field != "request_id" or attempt == SEND_ATTEMPTS:
                    raise
                # Another process sent blocks this one holds too, with others after them: what
                # the memory ever received (its original history, whatever was compressed
                # since) is not sent again.
                seen |= _received_keys(await client.get_original_messages(memory_id))
        raise AssertionError("unreachable")

    async def compress(self, agent: Any) -> bool:
        """Send what the server lacks, let it compress, and make the agent's context its working
        history; True when the server compressed. Raises what failed (the context unchanged)."""
        await self.send(agent)
        memory_id = self.memory_id_of(agent)
        state = agent.state
        # The server's system message (the offload instruction, the memory's shared pools) and the
        # working history after the server compressed it if needed, every page (read again from
        # the first page should another client change the memory between two pages).
        try:
            prepared = await self._clients.get().prepare_reasoning_input(memory_id)
        except NotFoundError:
            self._created.discard(memory_id)  # deleted between the send and now: as in `send`
            await self.send(agent)
            prepared = await self._clients.get().prepare_reasoning_input(memory_id)
        system, working, compressed = prepared.system, prepared.working, prepared.compressed
        self._system[memory_id] = [b.text for b in system.content if isinstance(b, TextBlock) and b.text]
        context = _rebuild(working, state.context)
        state.context = context
        state.middle_context[STATE_KEY] = {"memory_id": memory_id,
                                           "seen": sorted({_identity(m, b) for m in context for b in m.content})}
        if compressed:
            logger.info("agentscope-memory: the server compressed agent %r's context (memory %r) to %d messages",
                        getattr(agent, "name", "?"), memory_id, len(context))
        return compressed

    async def reload(self, memory_id: str, uuid: str) -> list[Msg]:
        """The messages offloaded under `uuid` (the server's not-found message when none)."""
        return (await self._clients.get().reload_context(memory_id, uuid)).messages

    async def list_tools(self) -> list[Any]:
        """The `context_reload` tool, answering from the memory of the agent calling it."""
        from agentscope.message import TextBlock as Text, ToolResultState
        from agentscope.permission import PermissionBehavior, PermissionDecision
        from agentscope.tool import FunctionTool, ToolChunk

        async def context_reload(working_context_offload_uuid: str = "", _agent_state: Any = None) -> Any:
            def answer(text: str, ok: bool) -> Any:
                return ToolChunk(content=[Text(text=text)],
                                 state=ToolResultState.SUCCESS if ok else ToolResultState.ERROR)

            uuid = (working_context_offload_uuid or "").strip()
            if not uuid:
                return answer(BLANK_UUID_TEXT, False)
            mine = _agent_state.middle_context.get(STATE_KEY) if _agent_state is not None else None
            if not isinstance(mine, dict) or not mine.get("memory_id"):
                return answer(f"Error reloading context with UUID {uuid}: this agent's context is not on the server yet",
                              False)
            try:
                msgs = await self.reload(mine["memory_id"], uuid)
            except Exception as exc:  # noqa: BLE001 - any failure is the tool's answer, as upstream
                return answer(f"Error reloading context with UUID {uuid}: {exc}", False)
            return answer(_offload_text(msgs), True)

        schema = {"type": "object", "properties": {"working_context_offload_uuid": {
            "type": "string", "description": PARAMETER_DESCRIPTION}}, "required": ["working_context_offload_uuid"]}
        return [FunctionTool(context_reload, name=TOOL_NAME, description=TOOL_DESCRIPTION, input_schema=schema,
                             is_read_only=True, is_state_injected=True,
                             permission=PermissionDecision(behavior=PermissionBehavior.ALLOW,
                                                           message=f"{TOOL_NAME} only reads the agent's own context."))]

    async def close(self) -> None:
        client = self._clients.take()
        if client is not None:
            await client.close()
