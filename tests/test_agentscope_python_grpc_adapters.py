"""The AgentScope-Python adapters with the real AgentScope releases, each in its own cached
virtualenv (tests/agentscope_python.py), against a real server's mem0 REST port, with the
scripted OpenAI-compatible model driving the agents end to end."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentscope_python import AGENTSCOPE_1, AGENTSCOPE_2, agentscope_python
from scripted_llm import ScriptedLLM, ScriptedReply

SCRIPTS = Path(__file__).parent / "agentscope_scripts"
KEY = "agentscope-python-key-00001"

pytestmark = pytest.mark.slow


async def _run_script(version: str, script: str, env: dict[str, str]) -> dict[str, Any]:
    """Runs `script` in AgentScope `version`'s environment with `env` added to this process's,
    and returns the JSON object it prints last."""
    python = await asyncio.to_thread(agentscope_python, version)
    proc = await asyncio.create_subprocess_exec(str(python), str(SCRIPTS / script), env={**os.environ, **env},
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 600)
    assert proc.returncode == 0, err.decode()[-4000:]
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


async def _run(version: str, script: str, rest_port: int, llm: ScriptedLLM) -> dict[str, Any]:
    return await _run_script(version, script, {"MEM0_REST_URL": f"http://127.0.0.1:{rest_port}",
                                               "LLM_URL": llm.base_url, "MEM0_KEY": KEY, "MEM0_TELEMETRY": "False"})


def _texts(request_body: dict[str, Any]) -> str:
    return json.dumps(request_body.get("messages", []), ensure_ascii=False)


async def test_agentscope1_react_agent_records_and_retrieves_through_remote_long_term_memory(server_factory) -> None:
    server = await server_factory(mem0_rest_port=0, api_keys={KEY: "python-tenant"})
    with ScriptedLLM() as llm:
        llm.push(
            ScriptedReply.tool_call("record_to_memory", {"thinking": "a lasting preference",
                                                         "content": ["The user likes Longjing tea"]}),
            ScriptedReply.text("Noted."),
            ScriptedReply.tool_call("retrieve_from_memory", {"keywords": ["Longjing tea"]}),
            ScriptedReply.text("You like Longjing tea."),
        )
        result = await _run(AGENTSCOPE_1, "agentscope1_long_term.py", server.mem0_rest_port, llm)
        calls = [r.body for r in llm.chat_requests]

    assert result["second"] == "You like Longjing tea."
    # The tools' schemas come from AgentScope's own docstrings.
    tools = {t["function"]["name"]: t["function"] for t in calls[0]["tools"]}
    assert "thinking" in tools["record_to_memory"]["parameters"]["properties"]
    assert "reasoning" in tools["record_to_memory"]["parameters"]["properties"]["thinking"]["description"]
    assert "keywords" in tools["retrieve_from_memory"]["parameters"]["properties"]
    # Static control: the second conversation starts with what the first one stored.
    assert "<long_term_memory>" in _texts(calls[2]) and "Longjing" in _texts(calls[2])
    # Agent control: the retrieve tool's result reached the model.
    assert "The user likes Longjing tea" in _texts(calls[3])
    assert "Longjing" in result["direct"]
    # What static control retrieved and put into the conversation is not recorded with it: it
    # came back inside the next retrieval.
    for recalled in (result["direct"], result["single"], result["after_load"]):
        assert "<long_term_memory>" not in recalled
        assert recalled.count("The user likes Longjing tea") <= 1
    assert "我住在杭州" in result["single"].splitlines()  # record() takes one message too
    # JSONSession saves the scope and loads it into another instance.
    assert result["saved"] == {"long_term_memory": {"agent_name": "Friday", "user_name": "alice", "run_name": None}}
    assert result["restored_agent"] == "Friday" and "Longjing" in result["after_load"]


async def test_agentscope2_agent_with_mem0_middleware_over_remote_client(server_factory) -> None:
    server = await server_factory(mem0_rest_port=0, api_keys={KEY: "python-tenant"})
    with ScriptedLLM(default=ScriptedReply.text("You like Longjing tea.")) as llm:
        llm.push(ScriptedReply.text("Noted."))
        result = await _run(AGENTSCOPE_2, "agentscope2_mem0_middleware.py", server.mem0_rest_port, llm)
        calls = [r.body for r in llm.chat_requests]

    assert any("我喜欢龙井茶" in r["memory"] for r in result["found"]["results"])
    # The second agent's model saw what the first conversation stored.
    assert any("龙井" in _texts(c) for c in calls[1:]), calls


@pytest.mark.parametrize("version, example, check", [
    (AGENTSCOPE_1, "agentscope1", "print(type(ltm).__name__, ltm.agent_name, ltm.user_name)"),
    (AGENTSCOPE_2, "agentscope2", "print(type(memory).__name__, type(client).__name__)"),
    (AGENTSCOPE_2, "agentscope2-context",
     "print(type(compression).__name__, type(slot).__name__, asyncio.run(toolkit.get_tool('context_reload')).name)"),
])
async def test_readme_examples_run_in_their_agentscope(server_factory, version, example, check) -> None:
    from test_mem0rest_grpc_readme import README_URL, readme_example

    server = await server_factory(mem0_rest_port=0)
    code = readme_example(example).replace(README_URL, f"http://127.0.0.1:{server.mem0_rest_port}") + check
    python = await asyncio.to_thread(agentscope_python, version)
    proc = await asyncio.create_subprocess_exec(str(python), "-c", code, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()[-4000:]
    assert out.decode().split() == {"agentscope1": ["RemoteLongTermMemory", "Friday", "alice"],
                                    "agentscope2": ["Mem0Middleware", "RemoteMem0Client"],
                                    "agentscope2-context": ["RemoteContextCompression", "RemoteAgentState",
                                                            "context_reload"]}[example]


async def test_agentscope1_remote_memory_under_a_react_agent(server_factory) -> None:
    server = await server_factory(api_keys={KEY: "python-tenant"})
    with ScriptedLLM(default=ScriptedReply.text("你好!")) as llm:
        python = await asyncio.to_thread(agentscope_python, AGENTSCOPE_1)
        env = {**os.environ, "GRPC_TARGET": server.address, "LLM_URL": llm.base_url, "MEM0_KEY": KEY}
        proc = await asyncio.create_subprocess_exec(str(python), str(SCRIPTS / "agentscope1_memory.py"), env=env,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 600)
    assert proc.returncode == 0, err.decode()[-4000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["reply"] == "你好!"
    assert result["size"] == 3 and result["marked"] == 1  # user, assistant, one block message
    # The compressed first message is hidden; the summary comes first.
    assert result["visible"] == ["SUMMARY", "你好!", "块 one\ntwo"]
    # AgentScope-Python's own content shape (a list of blocks) comes back unchanged.
    assert result["hint_content"] == [[{"type": "text", "text": "块 one"}, {"type": "text", "text": "two"}]]
    # JSONSession: the loaded module reads the same server-side conversation and summary.
    assert result["loaded_id"] == "py-chat-1" and result["loaded_size"] == 3
    assert result["loaded_summary"] == "SUMMARY"
    assert result["deleted"] == 1 and result["after_delete"] == 2
    # A mark change raced by another client's add keeps that add and the other client's tool call.
    assert result["race"] == {"marked": 1, "raced": 1, "texts": ["第一条", "", "added meanwhile"],
                              "tool_use": [{"q": "杭州"}], "seen": ["第一条"]}


async def test_agentscope1_remote_memory_answers_as_in_memory_memory(server_factory) -> None:
    """The same calls on AgentScope's own InMemoryMemory and on RemoteMemory give the same
    counts, messages and exceptions (marks of the wrong type, a mark replaced by one a message
    already has, more messages at once than one AddMessages call takes), and a JSONSession saved
with InMemoryMemory loads into RemoteMemory."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    result = await _run_script(AGENTSCOPE_1, "agentscope1_memory_parity.py", {"GRPC_TARGET": server.address, "MEM0_KEY": KEY})
    for local, remote in zip(result["local"], result["remote"], strict=True):
        assert remote == local
    assert result["local"][-2] == ["size after the bulk add", 1200]
    assert result["refusal"] == "ResourceExhaustedError" and result["after_refusal"] == 1200
    # A session saved with InMemoryMemory loads into RemoteMemory, replacing its conversation.
    session = result["session"]
    assert session["remote"] == session["local"] and session["local"]["size"] == 1202
    assert session["local"]["all"][0] == ["以前的总结", "user"] and len(session["local"]["新"]) == 2
    assert session["server_size"] == 1202
    assert session["saved_before_use"] == 1202 and session["saved_after_use"] == ["_compressed_summary", "memory_id"]


async def test_agentscope1_remote_memory_add_reads_only_what_changed_since(server_factory) -> None:
    """An add skips the ids already stored (InMemoryMemory's `allow_duplicates=False`) from a
    copy of the stored ids that it brings up to date with what changed since: it used to read
    the whole conversation, so each turn of a long conversation cost more than the last. The
    copy follows other clients: their adds are skipped (one made while this add was on its way
    too), and what they deleted or cleared may be added again, as with two callers of one
    InMemoryMemory."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    result = await _run_script(AGENTSCOPE_1, "agentscope1_memory_adds.py", {"GRPC_TARGET": server.address, "MEM0_KEY": KEY})
    for local, remote in zip(result["local"], result["remote"], strict=True):
        assert remote == local
    assert result["remote"][12] == ["b adds 3 (a stored it)", ["第3条"]]
    assert result["remote"][-1] == ["a adds 6 (b stored it)", ["第3条", "第6条", "第5条"]]
    assert result["remote"][9] == ["a adds 5 (stored) and 4 (deleted)", ["第5条", "第4条"]]
    # Messages the server sent one client's adds: the two another client added since, then
    # none, however long the conversation (it used to send all of it, every time).
    received = result["received"]
    assert received.pop("stored") == 3000 + 2 + 2
    assert received == {size: {"after_their_adds": 2, "after_my_add": 0} for size in ("10", "100", "1000", "3000")}


async def test_agentscope1_remote_memory_reads_nothing_after_its_own_deletes_marks_and_clears(server_factory) -> None:
    """RemoteMemory's own delete, mark change, delete by mark and clear used to leave its copy of
    the stored ids stale (their answers named no state), so its next add read the whole
    conversation again: 2000 messages after every delete or mark of a long conversation. Their
    answers carry the etag of the state they leave now, and the next add reads nothing; another
    client's add in between comes as just that message, another's delete as the whole list (as
    before: three pages), and the copy is the one a fresh read gives after every step."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    result = await _run_script(AGENTSCOPE_1, "agentscope1_memory_own_changes.py",
                               {"GRPC_TARGET": server.address, "MEM0_KEY": KEY})
    steps = {s.pop("step"): s for s in result["steps"]}
    assert all(s.pop("copy_is_current") and s.pop("unique") for s in steps.values()), result
    assert steps == {
        "我删除一条": {"received": 0, "pages": 0, "size": 2001},
        "我给两条加标记": {"received": 0, "pages": 0, "size": 2002},
        "我按标记删除": {"received": 0, "pages": 0, "size": 2001},
        "我删除后别人添加": {"received": 1, "pages": 0, "size": 2002},
        "我标记后别人删除": {"received": 2001, "pages": 3, "size": 2002},
        "我清空": {"received": 0, "pages": 0, "size": 1},
    }
    assert result["marked_left"] == 0


async def test_agentscope1_remote_memory_reads_receive_only_what_changed(server_factory) -> None:
    """ReActAgent calls get_memory (and size) at every reasoning step: RemoteMemory read the whole
    conversation each time, about 2000 messages per call for a 2000-message conversation. It
    answers from its copy of the conversation now, which each read checks with the copy's etag:
    nothing comes back when nothing changed, only another client's added messages, the whole
    list after another client's delete or mark change, nothing after its own changes; and every
    answer equals a fresh read's and InMemoryMemory's, a caller changing the messages it got
    and reads racing writes included."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    result = await _run_script(AGENTSCOPE_1, "agentscope1_memory_reads.py", {"GRPC_TARGET": server.address, "MEM0_KEY": KEY})
    steps = {s.pop("step"): s for s in result["steps"]}
    assert all(s.pop("as_fresh_read") and s.pop("as_in_memory_memory") for s in steps.values()), result
    first = steps.pop("第一次读")
    assert first["received"] == first["size"] == 2001 and first["pages"] >= 1
    # Each view is five reads (four get_memory and a size): one small round trip each.
    unchanged = steps.pop("没有变化")
    assert (unchanged["calls"], unchanged["received"], unchanged["pages"]) == (15, 0, 0)
    assert unchanged["bytes"] < 15 * 200, unchanged
    expected = {"别人添加一条": 1, "别人添加两条带标记": 2, "Java添加一条": 1, "我添加": 0, "我一次添加600条": 0, "我删除": 0,
                "我给Java的消息加标记": 0, "我替换标记": 0, "我按标记删除": 0, "我改拿到的消息": 0, "我清空": 0}
    for name, received in expected.items():
        assert (steps[name]["received"], steps[name]["pages"], steps[name]["calls"]) == (received, 0, 5), (name, steps[name])
    assert steps["我清空"]["size"] == 0
    # Another client's delete or mark change: the whole conversation, once.
    for name in ("别人删除一条", "别人改标记"):
        assert steps[name]["received"] == steps[name]["size"] > 2000 and steps[name]["pages"] >= 1, (name, steps[name])
    assert steps["别人清空后添加"]["received"] == steps["别人清空后添加"]["size"] == 1


async def test_agentscope1_two_remote_memories_of_one_conversation_answer_as_one_in_memory_memory(server_factory) -> None:
    """Two RemoteMemory instances of one conversation take turns at 120 random adds, deletes by
    ids and marks, mark changes, clears and session loads (marks with NUL, escapes, emoji, ""), each reading only
    now and then so the other's changes pile up behind its copy: every answer is InMemoryMemory's
    for the same calls, and every read a fresh RemoteMemory's; so are both after rounds of them
    writing at once. A copy brought up to date by a change's etags when another client had
    changed the memory first would read stale here."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    result = await _run_script(AGENTSCOPE_1, "agentscope1_memory_two_writers.py",
                               {"GRPC_TARGET": server.address, "MEM0_KEY": KEY})
    assert result["steps"] == 120 and result["final_size"] > 0, result
    assert set(result["kinds"]) == {"add", "delete", "delete_by_mark", "mark", "unmark", "remark", "clear", "load"}
    assert result["mismatches"] == [] and result["racing"] == [], result


async def test_agentscope1_remote_memory_deletes_and_marks_with_only_the_change_on_the_wire(server_factory) -> None:
    """RemoteMemory's delete, delete_by_mark and update_messages_mark read the whole
    conversation (StreamSaveState) and wrote it all back (StreamLoadState): about 1 MB each way
    for a one-message change of a 2000-message conversation, since marks live inside each
    stored message. Each is now one DeleteMessages or UpdateMessageMarks call of a few hundred
    bytes, and answers and leaves exactly what AgentScope's own InMemoryMemory does."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    result = await _run_script(AGENTSCOPE_1, "agentscope1_memory_wire.py", {"GRPC_TARGET": server.address, "MEM0_KEY": KEY})
    assert result["stored_bytes"] > 400_000  # the conversation the old calls sent twice over
    for local, remote in zip(result["local"], result["remote"], strict=True):
        wire = {k: remote.pop(k) for k in ("calls", "sent", "received")}
        assert remote == local
        if remote["step"] == "删除空列表":
            assert wire == {"calls": {}, "sent": 0, "received": 0}
            continue
        one = "UpdateMessageMarks" if "标记" not in remote["step"] and "删除" not in remote["step"] else "DeleteMessages"
        assert wire["calls"] == {one: 1}, (remote["step"], wire)
        assert wire["sent"] < 400 and wire["received"] < 400, (remote["step"], wire)
    answers = [s["answer"] for s in result["local"]]
    assert answers == [2, 3, 1, 2, 10, 1, 1, 0]
    assert result["remote_holds"] == result["local_holds"] and result["local_holds"]["size"] == 1987
    assert len(result["local_holds"]["旧"]) == 187 and len(result["local_holds"]["新"]) == 2


async def test_agentscope1_remote_memory_keeps_the_ids_of_messages_other_clients_wrote(server_factory) -> None:
    """A message another client wrote (a Java agent's turn) has no AgentScope-Python JSON beside
    it: RemoteMemory rebuilt it with a new id at every read, so Python could neither delete nor
    mark it by id, and an add of its id stored it twice. It keeps the stored id and time now,
    and a mark written from Python leaves the other client's blocks whole."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    result = await _run_script(AGENTSCOPE_1, "agentscope1_memory_foreign.py", {"GRPC_TARGET": server.address, "MEM0_KEY": KEY})
    assert result["same_at_every_read"] and result["times_kept"], result
    assert result["ids"][1] == "tool-call-1"
    assert result["after_add"] == ["明天上海天气如何？", "查一下", "谢谢"]
    assert (result["marked"], result["marked_texts"]) == (1, ["查一下"])
    assert result["blocks_kept"] == ["TextBlock", "ToolUseBlock"]
    assert (result["deleted"], result["after_delete"]) == (1, ["查一下", "谢谢"])


async def test_agentscope1_adapters_built_before_the_event_loop_serve_every_loop(server_factory) -> None:
    """An application builds its agent (and memories) at import time, then calls `asyncio.run`,
    maybe several times: the adapters work in each loop (a gRPC channel and pooled HTTP
    connections belong to the loop they were opened in)."""
    server = await server_factory(mem0_rest_port=0, api_keys={KEY: "python-tenant"})
    result = await _run_script(AGENTSCOPE_1, "agentscope1_event_loops.py", {
        "GRPC_TARGET": server.address, "MEM0_REST_URL": f"http://127.0.0.1:{server.mem0_rest_port}", "MEM0_KEY": KEY,
        "MEM0_TELEMETRY": "False"})
    assert result["first"] == {"texts": ["第1轮"], "recalled": ["我喜欢第1种茶"]}
    assert result["second"] == {"texts": ["第1轮", "第2轮"], "recalled": ["我喜欢第1种茶", "我喜欢第2种茶"]}


async def test_agentscope1_long_term_tools_answer_an_unreachable_server_with_an_error_text() -> None:
    """As AgentScope's Mem0LongTermMemory, the tools put a failure in their result (the model
    reads it; a direct caller gets a ToolResponse, not an exception)."""
    from conftest import free_port

    result = await _run_script(AGENTSCOPE_1, "agentscope1_long_term_unreachable.py",
                               {"MEM0_REST_URL": f"http://127.0.0.1:{free_port()}"})
    assert result["record"].startswith("Error recording memory: "), result
    assert result["retrieve"].startswith("Error retrieving memory: "), result


async def test_agentscope1_long_term_memory_rides_out_a_server_restart(tmp_path: Path) -> None:
    """A static-control agent retrieves before every reply: a server killed and restarted
    meanwhile costs that call a wait (as with the gRPC clients), not the agent's reply."""
    from conftest import ServerProcess, free_port

    rest_port, data = free_port(), tmp_path / "data"
    server = ServerProcess(data, None, "--mem0-rest-port", str(rest_port))
    python = await asyncio.to_thread(agentscope_python, AGENTSCOPE_1)
    env = {**os.environ, "MEM0_REST_URL": f"http://127.0.0.1:{rest_port}", "MEM0_TELEMETRY": "False"}
    proc = await asyncio.create_subprocess_exec(str(python), str(SCRIPTS / "agentscope1_long_term_restart.py"),
                                                env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    restarted = None
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), 120)).strip() == b"recorded"
        server.kill()
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        await asyncio.sleep(1)  # the retrieve finds no server, then it is back
        restarted = await asyncio.to_thread(ServerProcess, data, server.port, "--mem0-rest-port", str(rest_port))
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        for running in (server, restarted):
            if running is not None:
                running.kill()
    assert proc.returncode == 0, err.decode()[-4000:]
    assert json.loads(out.decode().strip().splitlines()[-1]) == {"found": "我喜欢白茶"}


class RecordingProxy:
    """Forwards every request to the server's REST port unchanged and keeps what arrived: the
    route, the tenant's key and the JSON body. `GET /__step__/<impl>/<name>` is kept and not
    forwarded: the script's mark of the call that follows."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.requests: list[tuple[str, str, Any]] = []
        self.url = ""

    async def __aenter__(self) -> RecordingProxy:
        import uvicorn
        from conftest import free_port
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        self._http = httpx.AsyncClient(base_url=self.target, timeout=60)

        async def forward(request: Request) -> Response:
            path, body = request.url.path, await request.body()
            if path.startswith("/__step__/"):
                self.requests.append(("step", path.removeprefix("/__step__/"), None))
                return Response("")
            self.requests.append((path, request.headers.get("authorization", ""), json.loads(body) if body else None))
            answer = await self._http.request(request.method, path, content=body, headers={
                k: v for k, v in request.headers.items() if k.lower() in ("authorization", "content-type")})
            return Response(answer.content, answer.status_code, media_type=answer.headers.get("content-type"))

        port = free_port()
        app = Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST", "PUT", "DELETE"])])
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None,
                                                     lifespan="off"))
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            await asyncio.sleep(0.02)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        await self._task
        await self._http.aclose()

    def by_step(self, impl: str) -> dict[str, list[tuple[str, Any]]]:
        """What reached the server during each of `impl`'s calls: (route, body) in arrival order."""
        steps: dict[str, list[tuple[str, Any]]] = {}
        current: list[tuple[str, Any]] | None = None
        for route, key, body in self.requests:
            if route == "step":
                owner, name = key.split("/", 1)
                current = steps.setdefault(name, []) if owner == impl else None
            elif current is not None:
                current.append((route, body))
        return steps


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)")


def _same_shape(text: str) -> str:
    """A result text without what two stores can never share: memory ids and times."""
    return _TIME.sub("<time>", _UUID.sub("<id>", text))


def _unordered(calls: list[tuple[str, Any]]) -> list[str]:
    # A call's searches run at once, so they may reach the server in any order.
    return sorted(json.dumps(c, ensure_ascii=False, sort_keys=True) for c in calls)


async def test_agentscope1_long_term_memory_sends_and_answers_as_mem0_long_term_memory(server_factory) -> None:
    """The same calls on AgentScope 1.0.21's own Mem0LongTermMemory (its mem0 client speaking
    to the server's REST facade) and on RemoteLongTermMemory: the server receives the same
    requests and both return the same texts, English and Chinese, failures included; except
    `record` and `retrieve(None)`, which differ on purpose (README)."""
    keys = {"upstream": "agentscope-python-key-upstream", "ours": "agentscope-python-key-ours-0"}
    server = await server_factory(mem0_rest_port=0, api_keys={keys["upstream"]: "upstream", keys["ours"]: "ours"})
    python = await asyncio.to_thread(agentscope_python, AGENTSCOPE_1)
    async with RecordingProxy(f"http://127.0.0.1:{server.mem0_rest_port}") as proxy:
        env = {**os.environ, "MEM0_REST_URL": proxy.url, "KEY_UPSTREAM": keys["upstream"], "KEY_OURS": keys["ours"]}
        proc = await asyncio.create_subprocess_exec(str(python), str(SCRIPTS / "agentscope1_long_term_parity.py"),
                                                    env=env, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 600)
    assert proc.returncode == 0, err.decode()[-4000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    upstream, ours = result["upstream"], result["ours"]
    sent_up, sent_ours = proxy.by_step("upstream"), proxy.by_step("ours")
    assert {key for _, key, _ in proxy.requests if key and "/" not in key} == {f"Token {k}" for k in keys.values()}

    differ = {"retrieve_none", "retrieve_image", "retrieve_long", "retrieve_image_only", "record", "record_again",
              "retrieve_after_record"}
    for step in upstream:
        if step not in differ:
            assert _same_shape(ours[step]) == _same_shape(upstream[step]), step
            assert _unordered(sent_ours.get(step, [])) == _unordered(sent_up.get(step, [])), step

    # What that is: the thinking and the contents as one user message...
    ids = {"agent_id": "Friday", "user_id": "小明"}
    joined = "用户的饮料偏好\nThe user likes Longjing tea\n用户住在杭州"
    assert sent_ours["record_to_memory"] == [("/memories", {
        "messages": [{"role": "user", "content": joined, "name": "user"}], "infer": True, **ids})]
    assert ours["record_to_memory"].startswith("Successfully recorded content to memory {'results': [{'id': ")
    assert f"'memory': '{joined}'" in ours["record_to_memory"].replace("\\n", "\n")
    # ... and, when the server stored nothing of it (it holds it already), again as an
    # assistant message, then without inference.
    assert [(b["messages"][0]["role"], b["infer"]) for _, b in sent_ours["record_to_memory_again"]] == [
        ("user", True), ("assistant", True), ("assistant", False)]
    assert ours["record_to_memory_again"].startswith("Successfully recorded content to memory {'results': [], ")
    assert [b["messages"][0]["content"] for _, b in sent_ours["record_to_memory_no_thinking"]] == ["我每天早上六点跑步"]
    assert ours["record_to_memory_nul"].startswith("Error recording memory: agentscope-memory answered 400: ")
    # Searches: each message's content as JSON, each keyword as is, one after the other with no
    # deduplication.
    assert [b["query"] for _, b in sent_ours["retrieve"]] == ['"龙井茶"']
    assert sent_ours["retrieve"][0][1]["filters"] == ids and sent_ours["retrieve"][0][1]["top_k"] == 5
    assert ours["retrieve"].split("\n")[:3] == joined.split("\n")
    assert sorted(b["query"] for _, b in sent_ours["retrieve_list"]) == ['"Longjing tea"', '"杭州"']
    assert ours["retrieve_list"] == f"{joined}\n{joined}"
    assert [b["query"] for _, b in sent_ours["retrieve_blocks"]] == ['[{"type": "text", "text": "跑步"}]']
    assert "我每天早上六点跑步" in ours["retrieve_blocks"].split("\n")
    assert ours["retrieve_empty_list"] == "" and sent_ours["retrieve_empty_list"] == []
    assert sorted(b["query"] for _, b in sent_ours["retrieve_from_memory"]) == ["Longjing tea", "龙井"]
    assert ours["retrieve_from_memory"].split("\n").count(joined.split("\n")[0]) == 2
    assert ours["retrieve_from_memory_empty_keyword"].startswith("Error retrieving memory: ")
    for step in ("retrieve_str", "retrieve_list_with_none"):
        assert ours[step] == "raised TypeError: The input message must be a Msg or a list of Msg objects."
    assert ours["record_str"] == "raised TypeError: The input messages must be a list of Msg objects."

    # The differences: retrieve(None) finds nothing where Mem0LongTermMemory raises...
    assert upstream["retrieve_none"].startswith("raised TypeError") and ours["retrieve_none"] == ""
    # ... a message's blocks are searched for their text alone, where Mem0LongTermMemory's
    # query holds the inline picture, too long for the server (and for an embedding model), so
    # the agent's reply would fail with it...
    assert upstream["retrieve_image"].startswith("raised Mem0ClientError: agentscope-memory answered 400: query: has ")
    assert [b["query"] for _, b in sent_ours["retrieve_image"]] == ['[{"type": "text", "text": "我喜欢什么茶？"}]']
    assert ours["retrieve_image"].split("\n")[:3] == joined.split("\n")
    assert ours["retrieve_image_only"] == "" and sent_ours["retrieve_image_only"] == []
    # ... a message longer than a query may be is searched by its first 64 Ki characters...
    assert upstream["retrieve_long"].startswith("raised Mem0ClientError: agentscope-memory answered 400: query: has ")
    assert [len(b["query"]) for _, b in sent_ours["retrieve_long"]] == [64 * 1024]
    assert sent_ours["retrieve_long"][0][1]["query"].startswith('"我喜欢什么茶？我喜欢什么茶？')
    assert ours["retrieve_long"].split("\n")[:3] == joined.split("\n")
    # ... and record() sends each message with text as its own, so recording the conversation
    # again adds only its new message, where Mem0LongTermMemory stores it whole each time.
    assert sent_up["record"] == [("/memories", {"messages": [
        {"role": "assistant", "content": "我喜欢喝白茶\n好的，记住了", "name": "assistant"}], "infer": True, **ids})]
    assert sent_ours["record"] == [("/memories", {"messages": [
        {"role": "user", "content": "我喜欢喝白茶"}, {"role": "assistant", "content": "好的，记住了"}], "infer": True, **ids})]
    assert ours["record"].startswith("{'results': [{'id': ") and ours["record"].count("'event': 'ADD'") == 2
    assert ours["record_again"].count("'event': 'ADD'") == 1 and "I also like oolong" in ours["record_again"]
    assert upstream["record_again"].count("'event': 'ADD'") == 1
    assert ours["retrieve_after_record"].count("我喜欢喝白茶") == 1
    assert upstream["retrieve_after_record"].count("我喜欢喝白茶") == 2
