"""The README's Python client examples, run as a new user would paste them: the quick start
against a real server, local mode in a fresh directory, and the tiered, long-term turn and
AutoContext examples (top-level `async with`, so run inside an async function)."""

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
    assert (tmp_path / "data").is_dir()
    listed = run("from pathlib import Path\n"
                 "from agentscope_memory.client import MemoryClient\n"
                 "from agentscope_memory.service import ServiceSettings\n"
                 "with MemoryClient.local(ServiceSettings(data_dir=Path('./data'))) as memory:\n"
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
