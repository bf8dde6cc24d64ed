"""The README's Python client examples, run as a new user would paste them: the quick start
against a real server, local mode in a fresh directory, and the tiered, long-term turn and
AutoContext examples (top-level `async with`: run inside an async function, and pasted as
written into `python -m asyncio`, one after another on one server, twice)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ServerThread

README = Path(__file__).resolve().parent.parent / "README.md"
README_ADDRESS = "127.0.0.1:50051"


def python_block(heading: str, containing: str) -> str:
    """The first ```python block of the section under `heading` that contains `containing`."""
    section = README.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    for block in re.findall(r"```python\n(.*?)\n```", section, re.DOTALL):
        if containing in block:
            return block
    raise AssertionError(f"no python block with {containing!r} under {heading!r}")


def run(code: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def in_async_main(block: str) -> str:
    """A block written for an async REPL, as a script: its imports, then the rest in `main()`."""
    lines = block.splitlines()
    imports = [line for line in lines if line.startswith(("from ", "import "))]
    body = "\n".join(line for line in lines if line not in imports)
    return "\n".join([
        "import asyncio", "from agentscope_memory.message import Msg, MsgRole", *imports,
        "async def main() -> None:", textwrap.indent(body, "    "), "asyncio.run(main())",
    ])


def test_quick_start_prints_the_message_it_added(threaded_server: ServerThread, tmp_path: Path) -> None:
    code = python_block("## Using it from Python", "MemoryClient(").replace(README_ADDRESS, threaded_server.address)
    assert run(code, tmp_path) == "USER Hello!\n"


def test_local_mode_needs_no_server_and_writes_the_data_directory(tmp_path: Path) -> None:
    code = python_block("## Using it from Python", "MemoryClient.local(")
    run(code + "\nprint([m.memory_id for m in memory.list_memories()])", tmp_path)
    # Not `./data`, which `make serve` holds in the same checkout.
    assert (tmp_path / "local-data").is_dir() and not (tmp_path / "data").exists()
    listed = run("from pathlib import Path\n"
                 "from agentscope_memory.client import MemoryClient\n"
                 "from agentscope_memory.service import ServiceSettings\n"
                 "with MemoryClient.local(ServiceSettings(data_dir=Path('./local-data'))) as memory:\n"
                 "    print([m.memory_id for m in memory.list_memories()])\n", tmp_path)
    assert listed == "['chat-42']\n"


def test_tiered_example_projects_the_deployment_window(threaded_server: ServerThread, tmp_path: Path) -> None:
    block = python_block("## Tiered working memory (Loom L1-L4)", "AsyncTieredClient(")
    code = in_async_main(block.replace(README_ADDRESS, threaded_server.address) + "\nprint(context.mode)")
    out = run(code, tmp_path)
    assert "tier=1, items=1" in out and out.rstrip().endswith("CONTEXTUAL")


def test_long_term_turn_example_runs(threaded_server: ServerThread, tmp_path: Path) -> None:
    # The turn goes into `chat-42`, which the quick start created.
    run(python_block("## Using it from Python", "MemoryClient(").replace(README_ADDRESS, threaded_server.address), tmp_path)
    block = python_block("## Long-term memory", "begin_turn(")
    code = in_async_main(block.replace(README_ADDRESS, threaded_server.address) + "\nprint(sorted(turn.tools))")
    assert run(code, tmp_path).splitlines()[-1] == "['recordToMemory', 'retrieveFromMemory']"


def test_auto_context_example_offloads_and_reloads_the_chinese_log(threaded_server: ServerThread,
                                                                   tmp_path: Path) -> None:
    block = python_block("## AutoContextMemory", "AsyncAutoContextClient(")
    code = in_async_main(block.replace(README_ADDRESS, threaded_server.address) + "\nprint(len(model_input))")
    assert run(code, tmp_path).splitlines() == ["['LARGE_MESSAGE_OFFLOAD_WITH_PROTECTION']", "部署窗口是周二上午十点。", "6"]


def paste_into_asyncio_repl(block: str, cwd: Path) -> str:
    """What `python -m asyncio` prints for `block` pasted as it stands (then an empty line)."""
    done = subprocess.run([sys.executable, "-m", "asyncio"], input=block + "\n\n", capture_output=True,
                          text=True, timeout=300, cwd=cwd)
    # The REPL goes on after an exception (and exits 0): what it reports on stderr is the failure.
    assert not re.search(r"^(Traceback|\w*(Error|Exception)\b)", done.stderr, re.MULTILINE), done.stderr
    return done.stdout


def test_examples_pasted_in_readme_order_into_one_server_twice(threaded_server: ServerThread,
                                                               tmp_path: Path) -> None:
    # A reader pastes the quick start, then the AutoContext, tiered and long-term turn examples,
    # into one server, and pastes them again: each must work as written (its own imports, its
    # own memory id) and again on the memories the first round left.
    quick_start = python_block("## Using it from Python", "MemoryClient(").replace(README_ADDRESS, threaded_server.address)
    auto_context = python_block("## AutoContextMemory", "AsyncAutoContextClient(").replace(README_ADDRESS, threaded_server.address)
    tiered = python_block("## Tiered working memory (Loom L1-L4)", "AsyncTieredClient(").replace(README_ADDRESS, threaded_server.address)
    turn = python_block("## Long-term memory", "begin_turn(").replace(README_ADDRESS, threaded_server.address)
    for round_ in (1, 2):
        assert run(quick_start, tmp_path).endswith("USER Hello!\n")
        out = paste_into_asyncio_repl(auto_context, tmp_path)
        assert "['LARGE_MESSAGE_OFFLOAD_WITH_PROTECTION']\n部署窗口是周二上午十点。\n" in out
        out = paste_into_asyncio_repl(tiered, tmp_path)
        assert f"TierUsage(tier=1, items={round_}," in out
        out = paste_into_asyncio_repl(turn + "\n\nprint(sorted(turn.tools))", tmp_path)
        assert "['recordToMemory', 'retrieveFromMemory']" in out
