"""A conversation left with unanswered tool calls (a crash during a tool call) is made usable
again: the library's rule, the clients' `close_pending_tool_calls` and the CLI."""

from __future__ import annotations

import pytest

from agentscope_memory.client import MemoryClient
from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock
from agentscope_memory.short_term.pending_tools import INTERRUPTED, interrupted_results, pending_tool_calls
from agentscope_memory_server.cli import main


def _use(*ids: str) -> Msg:
    return Msg.create(MsgRole.ASSISTANT, name="助手", content=[ToolUseBlock(i, f"tool_{i}", {}, None, {}) for i in ids])


def _result(call_id: str) -> Msg:
    return Msg.create(MsgRole.TOOL, name="助手", content=[ToolResultBlock(call_id, f"tool_{call_id}", [TextBlock("ok")], {})])


def test_pending_calls_are_those_of_the_last_assistant_message_without_a_result() -> None:
    user = Msg.create(MsgRole.USER, "订一张桌子")
    assert pending_tool_calls([]) == []
    assert pending_tool_calls([user]) == []
    # Two of three parallel calls answered: the third is pending.
    history = [user, _use("a", "b", "c"), _result("a"), _result("b")]
    assert [b.id for b in pending_tool_calls(history)] == ["c"]
    # Only the last assistant message counts (ReActAgent's rule): an earlier gap is history.
    assert pending_tool_calls([user, _use("x"), Msg.create(MsgRole.ASSISTANT, "done"), user]) == []
    # Everything answered, or a plain answer last: nothing pending.
    assert pending_tool_calls(history + [_result("c")]) == []
    closing = interrupted_results(history, "助手")
    assert len(closing) == 1 and closing[0].role is MsgRole.TOOL and closing[0].name == "助手"
    block = closing[0].content[0]
    assert isinstance(block, ToolResultBlock) and (block.id, block.name) == ("c", "tool_c")
    assert block.output == [TextBlock(INTERRUPTED.format(name="tool_c"))]
    assert pending_tool_calls(history + closing) == []


def test_the_client_and_the_cli_close_pending_calls_once(threaded_server, capsys: pytest.CaptureFixture[str]) -> None:
    with MemoryClient(threaded_server.address) as client:
        client.create_memory("cut-off")
        client.add_messages("cut-off", [Msg.create(MsgRole.USER, "book two tables"), _use("t1", "t2"), _result("t1")])
        added = client.close_pending_tool_calls("cut-off", "助手")
        assert [m.content[0].id for m in added] == ["t2"]  # type: ignore[union-attr]
        assert client.close_pending_tool_calls("cut-off", "助手") == []

        client.create_memory("cli")
        client.add_messages("cli", [Msg.create(MsgRole.USER, "hi"), _use("k1")])
        args = ["memory", "close-tool-calls", "--target", threaded_server.address, "--memory-id", "cli", "--agent-name", "助手"]
        assert main(args) == 0
        assert "answered tool_k1 [k1] as interrupted" in capsys.readouterr().out
        stored = client.get_messages("cli")
        assert stored[-1].role is MsgRole.TOOL and stored[-1].content[0].output[0].text.startswith("[ERROR]")  # type: ignore[union-attr]
        assert main(args) == 0
        assert "no unanswered tool call" in capsys.readouterr().out
        assert len(client.get_messages("cli")) == 3
