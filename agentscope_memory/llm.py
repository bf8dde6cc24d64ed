"""A small client for OpenAI-compatible chat-completions endpoints (summaries, extraction).

Timeouts, connection failures and 5xx answers are retried with exponential backoff; what is
left becomes a library error a caller can act on (DeadlineExceededError, UnavailableError).
A response body is read up to `MAX_RESPONSE_BYTES` only: a larger one (a broken or hostile
endpoint; no model writes megabytes) is an unusable reply, UnavailableError as a malformed one
is, so the server never holds an endpoint's whole answer of any size in memory.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import re
from dataclasses import dataclass
from typing import Any

import httpx

from agentscope_memory.errors import DeadlineExceededError, UnavailableError
from agentscope_memory.tracing import span


# The most of a response body that is read (after decompression); a reply passing it is unusable.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024

# What a model may write that no store keeps alike: NUL (PostgreSQL text and jsonb refuse it,
# SQLite keeps it) and lone surrogates (no UTF-8 form; neither database takes them).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """A model's text as every store holds it: NUL dropped, a lone surrogate replaced by U+FFFD.
    For each string a reply yields (the reply itself, and each string decoded from JSON in it)."""
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def _tokens(value: Any) -> int:
    """A usage count as the server reported it; 0 when it is missing or not a count: the
    answer is usable without it (token accounting is informational)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**63:
        return 0
    return int(value)


async def _read_capped(response: httpx.Response) -> bytes | None:
    """The response's body, or None once it passes MAX_RESPONSE_BYTES (what it declares, or what
    arrives: a body without a length, or compressed, is counted as it is decoded)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES and "content-encoding" not in response.headers:
        return None
    content = bytearray()
    async for chunk in response.aiter_bytes():
        content += chunk
        if len(content) > MAX_RESPONSE_BYTES:
            return None
    return bytes(content)


def _start(content: bytes | None) -> str:
    """The start of a body, for an error message."""
    return "(too large)" if content is None else content[:200].decode("utf-8", "replace")


@dataclass(frozen=True)
class LlmConfig:
    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 2


@dataclass(frozen=True)
class ChatResult:
    text: str
    input_tokens: int
    output_tokens: int
    seconds: float


class ChatClient:
    def __init__(self, config: LlmConfig, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._client = client or httpx.AsyncClient(timeout=config.timeout_s)

    async def close(self) -> None:
        await self._client.aclose()

    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatResult:
        # Attribute names follow OpenTelemetry's generative-AI semantic conventions.
        with span(f"chat {self.config.model}", {"gen_ai.operation.name": "chat",
                                                 "gen_ai.request.model": self.config.model}) as current:
            result = await self._chat(messages, **options)
            if current is not None:
                current.set_attribute("gen_ai.usage.input_tokens", result.input_tokens)
                current.set_attribute("gen_ai.usage.output_tokens", result.output_tokens)
            return result

    async def _chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatResult:
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        headers = {"content-type": "application/json"}
        if self.config.api_key:
            headers["authorization"] = f"Bearer {self.config.api_key}"
        body = {"model": self.config.model, "messages": messages, **options}
        last: Exception | None = None
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                await asyncio.sleep(min(0.2 * 2 ** (attempt - 1), 5.0))
            loop = asyncio.get_running_loop()
            started = loop.time()
            try:
                async with self._client.stream("POST", url, json=body, headers=headers) as response:
                    content = await _read_capped(response)
            except httpx.TimeoutException as exc:
                last = DeadlineExceededError(f"LLM at {self.config.base_url} timed out after {self.config.timeout_s}s")
                last.__cause__ = exc
                continue
            except httpx.HTTPError as exc:
                last = UnavailableError(f"LLM at {self.config.base_url} is unreachable: {exc}")
                continue
            if response.status_code >= 500 or response.status_code == 429:
                last = UnavailableError(f"LLM at {self.config.base_url} answered HTTP {response.status_code}")
                continue
            if response.status_code >= 400:
                raise UnavailableError(
                    f"LLM at {self.config.base_url} refused the request: HTTP {response.status_code} {_start(content)}"
                )
            if content is None:
                # Not retried: the same request would bring the same answer.
                raise UnavailableError(f"LLM at {self.config.base_url} gave an unusable response: larger than"
                                       f" {MAX_RESPONSE_BYTES // (1024 * 1024)} MiB, not read further")
            return self._parse(content, loop.time() - started)
        assert last is not None
        raise last

    def _parse(self, content: bytes, seconds: float) -> ChatResult:
        try:
            data = json.loads(content)
            text = data["choices"][0]["message"]["content"]
        # RecursionError: JSON nested deeper than the decoder goes, garbage like any other.
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            raise UnavailableError(f"LLM at {self.config.base_url} gave a malformed response: {_start(content)}") from None
        if isinstance(text, str):
            text = storable_text(text)
        if not isinstance(text, str) or not text.strip():
            raise UnavailableError(f"LLM at {self.config.base_url} gave an empty response")
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        return ChatResult(text, _tokens(usage.get("prompt_tokens")), _tokens(usage.get("completion_tokens")), seconds)


# Reasoning models put their reasoning inside the answer: <think>...</think> (some templates open
# the tag in the prompt, so the answer holds only the closing one), or <thinking>.
_THINK_TAG = re.compile(r"</?(?:think|thinking)>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"^\s*<(?:think|thinking)>", re.IGNORECASE)
# Marks around a tag an answer writes about ("`</think>`", "“</think>”", "「</think>」", a code
# sample's '</think>'): a model's own tag never stands between a matching pair of them.
_QUOTES = {"`": "`", '"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u300c": "\u300d",
           "\u300e": "\u300f"}
# The tags, with what tells whether a mark written the same both ways opens or closes a quote:
# the line's earlier marks of its kind (an apostrophe inside a word, "model's", is none).
_TAGS_AND_MARKS = re.compile(r"<(/?)(think|thinking)>|\n|[`\"]|(?<![A-Za-z0-9])'|'(?![A-Za-z0-9])",
                             re.IGNORECASE)


def _unquoted_tags(text: str) -> list[tuple[int, int, bool, str]]:
    """The think tags of `text` not written between a matching pair of quotes, as (start, end,
    closing, name). A mark written the same both ways quotes a tag only when it opens a quote:
    thinking that ended on a quoted word right before an answer starting with one
    (`"好"</think>"部署"`) has the same marks either side of its tag, and read as a quote the
    block never closed and the whole answer went as thinking. A backtick after the tag that
    opens a code fence (```json) is no quote: the answer starts there."""
    tags: list[tuple[int, int, bool, str]] = []
    if not _THINK_TAG.search(text):
        return tags  # most answers: no need to follow their quotes
    opened: set[str] = set()  # the symmetric marks that opened a quote on this line
    for m in _TAGS_AND_MARKS.finditer(text):
        name = m.group(2)
        if name is None:
            mark = m.group()
            if mark == "\n":
                opened.clear()
            else:
                opened ^= {mark}
            continue
        start, end = m.span()
        before = text[start - 1] if start else ""
        quoted = (end < len(text) and _QUOTES.get(before) == text[end] and not text.startswith("```", end)
                  and (before != text[end] or before in opened))
        if not quoted:
            tags.append((start, end, bool(m.group(1)), name.lower()))
    return tags


def strip_thinking(text: str) -> str:
    """`text` without a reasoning model's thinking. For every answer read as text or JSON, whose
    braces a thought holding braces would otherwise confuse.

    The rule, over the tags not quoted (a quoted one is text the answer writes about):
    - an opening tag, not inside a removed block, opens a block that ends at the next closing tag
      of its name; the block goes;
    - a closing tag left over ends thinking only where thinking can be: when it is the first
      closing tag of the answer (the template opened the tag, so the thinking comes first and
      everything before it goes), or when it closes a tag opened inside the block just removed
      (`<think>a<think>b</think>c</think>`: the rest of that nested block goes too). Any other is
      a mention (a summary of a talk about reasoning models, a code sample) and stays: cutting
      up to the last one, as before, lost everything the answer wrote before it. An answer
      without thinking whose first closing tag is a bare mention reads as thinking still:
      nothing tells the two apart;
    - an answer then starting with an opening tag is all thinking (cut off while thinking).

    One pass over the tags: the regular expression `<think>.*?</think>` scanned to the end from
    every opening tag left unclosed, so an answer stuck repeating `<think>` (160 KB of it) held
    the event loop, and every other call of the server, for 20 s, a megabyte of it for minutes."""
    tags = _unquoted_tags(text)
    # The closing tags of each name as (start, index in tags), and the opening tags before each tag.
    closes: dict[str, list[tuple[int, int]]] = {"think": [], "thinking": []}
    opens_before = [0]
    for index, (start, _, closing, name) in enumerate(tags):
        if closing:
            closes[name].append((start, index))
        opens_before.append(opens_before[-1] + (not closing))
    close_starts = {name: [start for start, _ in found] for name, found in closes.items()}
    first_close = next((index for index, tag in enumerate(tags) if tag[2]), -1)
    kept: list[str] = []
    pos = 0
    owed = 0  # tags opened inside the block just removed and not closed there
    for index, (start, end, closing, name) in enumerate(tags):
        if start < pos:
            continue
        if closing:
            if index == first_close or owed:
                pos = end
                owed = max(0, owed - 1)
            continue
        found = bisect.bisect_left(close_starts[name], end)
        if found == len(close_starts[name]):
            continue
        close = closes[name][found][1]
        kept.append(text[pos:start])
        pos = tags[close][1]
        inner_opens = opens_before[close] - opens_before[index + 1]
        owed = max(0, inner_opens - (close - index - 1 - inner_opens))
    kept.append(text[pos:])
    text = "".join(kept)
    return "" if _THINK_OPEN.match(text) else text.strip()
