"""Runs inside the AgentScope 1.0.21 virtualenv: two RemoteMemory instances of one conversation
(two agents' processes) take turns at random adds, deletes by ids and by marks, mark changes,
clears and loads of a saved InMemoryMemory session, with marks of odd text (NUL, escapes, emoji, ""); each call's answer and, after every
call, what both read are compared with one InMemoryMemory given the same calls and with a fresh
RemoteMemory's read. Then both write at once for some rounds and must read what a fresh one
does. Prints one JSON line."""

import asyncio
import copy
import json
import os
import random
from typing import Any

from agentscope.memory import InMemoryMemory, MemoryBase
from agentscope.message import Msg

from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory

TARGET, KEY = os.environ["GRPC_TARGET"], os.environ.get("MEM0_KEY")
MEMORY_ID = "两个写者-对话"
MARKS = ["甲", "乙", "a\x00b", "\x1b[0m", "🙂", ""]


async def view(memory: MemoryBase) -> dict[str, Any]:
    out: dict[str, Any] = {"all": [[m.id, m.get_text_content(), m.role] for m in await memory.get_memory(prepend_summary=False)],
                           "size": await memory.size()}
    for mark in MARKS:
        out[repr(mark)] = [m.id for m in await memory.get_memory(mark=mark, prepend_summary=False)]
    out["no 甲"] = [m.id for m in await memory.get_memory(exclude_mark="甲", prepend_summary=False)]
    return out


async def main() -> None:
    rng, looks = random.Random(20261127), random.Random(7)
    writers = [RemoteMemory(TARGET, MEMORY_ID, api_key=KEY), RemoteMemory(TARGET, MEMORY_ID, api_key=KEY)]
    local = InMemoryMemory()
    turns = iter(range(100_000))

    def ids() -> list[str]:
        known = [m.id for m, _ in local.content]
        chosen = rng.sample(known, min(len(known), rng.randint(1, 3))) if known else []
        return chosen + (["没有这条"] if rng.random() < 0.3 else [])

    def marks() -> list[str]:
        return rng.sample(MARKS, rng.randint(1, 2))

    def op() -> tuple[str, Any]:
        kind = rng.choices(["add", "delete", "delete_by_mark", "mark", "unmark", "remark", "clear", "load"],
                           [6, 2, 2, 2, 1, 2, 0.3, 0.6])[0]
        if kind == "add":
            msgs = [Msg("用户", f"第{next(turns)}句", rng.choice(["user", "assistant"])) for _ in range(rng.randint(1, 3))]
            return kind, (lambda m: m.add(msgs, marks=marks() if rng.random() < 0.7 else None))
        if kind == "delete":
            chosen = ids()
            return kind, (lambda m: m.delete(chosen))
        if kind == "delete_by_mark":
            chosen_marks = marks()
            return kind, (lambda m: m.delete_by_mark(chosen_marks))
        if kind == "mark":
            new, chosen = rng.choice(MARKS), (ids() if rng.random() < 0.6 else None)
            return kind, (lambda m: m.update_messages_mark(new, msg_ids=chosen))
        if kind == "unmark":
            old = rng.choice(MARKS)
            return kind, (lambda m: m.update_messages_mark(None, old_mark=old))
        if kind == "remark":
            new, old = rng.sample(MARKS, 2)
            return kind, (lambda m: m.update_messages_mark(new, old_mark=old))
        if kind == "load":
            # A session saved from InMemoryMemory, every other message of it, loaded (the
            # adapter sends it at its next use: here its size).
            state = copy.deepcopy(local.state_dict())
            state["content"] = state["content"][::2]

            async def load(m: MemoryBase) -> int:
                m.load_state_dict(copy.deepcopy(state))
                return await m.size()

            return kind, load
        return kind, (lambda m: m.clear())

    mismatches: list[Any] = []
    kinds: dict[str, int] = {}
    steps = 0
    for step in range(120):
        # The add's lambda draws its marks when called: draw once, for both memories alike.
        kind, call = op()
        kinds[kind] = kinds.get(kind, 0) + 1
        who = writers[rng.randrange(2)]
        state = rng.getstate()
        answer = await call(who)
        rng.setstate(state)
        expected = await call(local)
        steps += 1
        fresh = RemoteMemory(TARGET, MEMORY_ID, api_key=KEY)
        truth = await view(fresh)
        await fresh.close()
        # Each writer reads only now and then, so the other's changes pile up behind its copy.
        seen = [await view(w) for w in writers if looks.random() < 0.4]
        if answer != expected or any(s != truth for s in seen) or await view(local) != truth:
            mismatches.append({"step": step, "kind": kind, "answer": answer, "expected": expected})
    # Both at once: whatever the server's order, each reads what a fresh one reads.
    racing: list[Any] = []
    for round_ in range(15):
        calls = [op()[1] for _ in range(4)]
        await asyncio.gather(*(call(writers[i % 2]) for i, call in enumerate(calls)))
        fresh = RemoteMemory(TARGET, MEMORY_ID, api_key=KEY)
        truth = await view(fresh)
        await fresh.close()
        if [await view(w) for w in writers] != [truth, truth]:
            racing.append(round_)
    final = await view(writers[0])
    for w in writers:
        await w.close()
    print(json.dumps({"kinds": kinds, "steps": steps, "mismatches": mismatches, "racing": racing, "final_size": final["size"]},
                     ensure_ascii=False, default=str))


asyncio.run(main())
