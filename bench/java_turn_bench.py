"""Java client: what the remote memory adds to a ReActAgent turn with three tool rounds, against
AgentScope's InMemoryMemory in the same run: a new conversation every turn, one long conversation
(1,000 earlier messages) going on, and the same with a second client adding a message to that
conversation before every turn. Each with the default client (coherent caching,
and adds of the model's output waiting for their confirmation: `AddConfirmation.MODEL_OUTPUT`),
whose entries carry no suffix; then without coherent caching (`coherentCache(false)`: a call per
read and per add), with every add waiting (`EVERY_ADD`), and with none waiting (`ON_FLUSH`: the
turn's pending adds are flushed after it, timed apart as `flush_ms_after_turn`); and one
`addMessage` alone, as an `AddMessages` call and over the watch stream.

A turn's figure (`p50_ms`) is the remote memory's added cost: the median, over turns, of the
whole `agent.call` on the remote memory less the same turn on InMemoryMemory just before it. The
time inside memory calls alone (`remote_calls_ms_per_turn`) would miss part of it: a read copies
each message only when the agent first reads it from the returned list.

Builds the test classes of the AgentScope-Java 1.x module (clients/java/agentscope1, and the core
module it depends on) with Maven, then runs MemoryTurnBenchmark (a plain `main`, not a test),
which starts its own server from the repo's .venv. Skipped, with a note, when Java or Maven is
missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from bench.harness import REPO

JAVA_DIR = REPO / "clients" / "java"
MODULE_DIR = JAVA_DIR / "agentscope1"
TURNS = 200
WARMUP_TURNS = 50


# The default client's entries carry no suffix (their names are what the targets refer to).
_MODES = {
    (True, "MODEL_OUTPUT"): "",
    (False, "EVERY_ADD"): ", no coherent cache (a call per read and add)",
    (True, "EVERY_ADD"): ", coherent cache, every add waits",
    (True, "ON_FLUSH"): ", coherent cache, no add waits (flushed after the turn)",
}


def _skip(results: list[dict], why: str) -> None:
    print(f"java_turn_bench: skipped ({why})", file=sys.stderr)
    results.append({"benchmark": "java ReActAgent turn (3 tool rounds)", "skipped": why})


async def run(results: list[dict]) -> None:
    mvn, java = shutil.which("mvn"), shutil.which("java")
    if not mvn or not java:
        _skip(results, "mvn or java not on PATH")
        return
    # A relative output file: every module of the reactor (-am adds core) writes its own; the
    # core module appears in agentscope1's as its target/classes and target/test-classes.
    classpath_file = MODULE_DIR / "target" / "bench-classpath.txt"
    subprocess.run(
        [mvn, "-B", "-ntp", "-q", "-pl", "agentscope1", "-am", "test-compile", "dependency:build-classpath",
         "-Dmdep.includeScope=test", "-Dmdep.outputFile=target/bench-classpath.txt"],
        cwd=JAVA_DIR, check=True)
    classpath = ":".join([str(MODULE_DIR / "target" / "classes"), str(MODULE_DIR / "target" / "test-classes"),
                          classpath_file.read_text().strip()])
    done = subprocess.run(
        [java, f"-Dagentscope.memory.repo={REPO}", "-cp", classpath,
         "dev.agentscopememory.agentscope1.MemoryTurnBenchmark", str(TURNS), str(WARMUP_TURNS)],
        cwd=MODULE_DIR, check=True, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue
        report = json.loads(line)
        if report.get("add_only"):
            # One addMessage alone: over the watch stream (coherent cache) or as AddMessages.
            how = "over the watch (coherent cache)" if report["coherent_cache"] else "AddMessages call"
            results.append({"benchmark": f"java addMessage alone, {how}", "p50_ms": report["addMessage_ms_p50"],
                            **report})
            continue
        history = report["history_messages"]
        other = ", another client writing each turn" if report.get("other_writer") else ""
        coherent = _MODES[(report["coherent_cache"], report["add_confirmation"])]
        results.append({
            "benchmark": f"java ReActAgent turn, 3 tool rounds, {history} earlier msgs{other}{coherent}",
            # The remote memory's added cost per turn: the turn's whole time against InMemoryMemory's.
            "p50_ms": report["overhead_ms_per_turn"],
            "ratio_to_in_memory": report["ratio"],
            **report,
        })
