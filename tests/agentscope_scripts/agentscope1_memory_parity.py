"""Runs inside the AgentScope 1.0.21 virtualenv: the same calls on AgentScope's own
InMemoryMemory and on RemoteMemory; prints each call's outcome for both as one JSON line
(return values, or the exception's type), so the test compares them call by call; then the
InMemoryMemory's JSONSession loaded into a RemoteMemory."""

import asyncio
import json
import os
import tempfile
from typing import Any

from agentscope.memory import InMemoryMemory, MemoryBase
from agentscope.message import Msg, TextBlock
from agentscope.session import JSONSession

from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory

TARGET, KEY = os.environ["GRPC_TARGET"], os.environ.get("MEM0_KEY")


def _shown(value: Any) -> Any:
    # Messages by id and text: the summary message AgentScope makes has a new id every time.
    if isinstance(value, list):
        return [[m.get_text_content(), m.role] for m in value]
    return value


async def _calls(memory: MemoryBase, msgs: list[Msg], bulk: list[Msg]) -> list[list[Any]]:
    a, b, c, d = msgs
    steps = [
        ("add one, marked", lambda: memory.add(a, marks="x")),
        ("add two, two marks", lambda: memory.add([b, c], marks=["x", "y"])),
        ("add a known id and a new one", lambda: memory.add([a, d])),
        ("add None", lambda: memory.add(None)),
        ("add with a mark that is not a string", lambda: memory.add(Msg("user", "坏", "user"), marks=[1])),
        ("add with a mark that is a tuple", lambda: memory.add(Msg("user", "坏", "user"), marks=("x",))),
        ("size", memory.size),
        ("mark all x (three have it)", lambda: memory.update_messages_mark("x")),
        ("x replaces y (they have x already)", lambda: memory.update_messages_mark("x", old_mark="y")),
        ("y marked", lambda: memory.get_memory(mark="y")),
        ("z replaces x on one", lambda: memory.update_messages_mark("z", old_mark="x", msg_ids=[a.id])),
        ("unmark x on one", lambda: memory.update_messages_mark(None, old_mark="x", msg_ids=[b.id])),
        ("unmark with no old mark", lambda: memory.update_messages_mark(None)),
        ("x marked", lambda: memory.get_memory(mark="x")),
        ("not z", lambda: memory.get_memory(exclude_mark="z")),
        ("get with an int mark", lambda: memory.get_memory(mark=3)),
        ("delete by a mark that is not a string", lambda: memory.delete_by_mark([1])),
        ("delete by marks", lambda: memory.delete_by_mark(["z", "none such"])),
        ("delete by ids", lambda: memory.delete([c.id, "none such"])),
        ("all", memory.get_memory),
        ("summary", lambda: memory.update_compressed_summary("总结")),
        ("all with summary", memory.get_memory),
        ("clear", memory.clear),
        ("size after clear", memory.size),
        # More than one AddMessages call takes (a whole earlier conversation at once).
        ("add 1200 at once", lambda: memory.add(bulk, marks="旧")),
        ("size after the bulk add", memory.size),
        ("the bulk, in order", lambda: memory.get_memory(mark="旧", prepend_summary=False)),
    ]
    outcomes = []
    for name, call in steps:
        try:
            outcomes.append([name, _shown(await call())])
        except Exception as exc:  # noqa: BLE001 - the outcome compared is the exception's type
            outcomes.append([name, f"raises {type(exc).__name__}"])
    return outcomes


async def main() -> None:
    msgs = [Msg("user", "你好 一", "user"), Msg("Friday", [TextBlock(type="text", text="二")], "assistant"),
            Msg("system", "三", "system"), Msg("user", "四", "user")]
    bulk = [Msg("user", f"第{i}条 " + "字" * 2000, "user") for i in range(1200)]
    in_memory = InMemoryMemory()
    local = await _calls(in_memory, msgs, bulk)
    remote_memory = RemoteMemory(TARGET, "py-parity-对照", api_key=KEY)
    remote = await _calls(remote_memory, msgs, bulk)
    # A bulk add the server refuses (one message over its 4 MiB) stores none of it.
    refused = [Msg("user", f"新{i}", "user") for i in range(1200)] + [Msg("user", "大" * 2_000_000, "user")]
    try:
        await remote_memory.add(refused)
        refusal = "stored"
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        refusal = type(exc).__name__
    after_refusal = await remote_memory.size()
    await remote_memory.close()
    print(json.dumps({"local": local, "remote": remote, "refusal": refusal, "after_refusal": after_refusal,
                      "session": await _session_from_in_memory_memory(in_memory)}, ensure_ascii=False))


async def _session_from_in_memory_memory(in_memory: InMemoryMemory) -> dict[str, Any]:
    """A JSONSession an application saved with InMemoryMemory, loaded into RemoteMemory."""
    await in_memory.add([Msg("user", "标记", "user"), Msg("assistant", "未标记", "assistant")], marks=["新", "另"])
    await in_memory.update_compressed_summary("以前的总结")
    with tempfile.TemporaryDirectory() as d:
        await JSONSession(save_dir=d).save_session_state("会话", user_id="用户", memory=in_memory)
        remote = RemoteMemory(TARGET, "py-parity-会话", api_key=KEY)
        await remote.add(Msg("user", "loaded over", "user"))
        await JSONSession(save_dir=d).load_session_state("会话", user_id="用户", memory=remote)
    # Saved again before it is used (nothing is on the server yet): still the whole conversation.
    views: dict[str, Any] = {"saved_before_use": len(remote.state_dict().get("content", []))}
    for name, memory in (("local", in_memory), ("remote", remote)):
        views[name] = {"all": _shown(await memory.get_memory()), "新": _shown(await memory.get_memory(mark="新", prepend_summary=False)),
                       "size": await memory.size()}
    # The messages are on the server: another process reads them without the session.
    other = RemoteMemory(TARGET, "py-parity-会话", api_key=KEY)
    views["server_size"] = await other.size()
    views["saved_after_use"] = sorted(remote.state_dict())
    await remote.close()
    await other.close()
    return views


asyncio.run(main())
