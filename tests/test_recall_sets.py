"""The labelled recall sets (A, B and the cross-lingual X) are what their generators write,
labels point at real memories of the query's own conversation, and set B shares no fact
statement with set A (it stands for data the ranking was not tuned on)."""

from __future__ import annotations

import json

import pytest

from bench import ltm_recall_data, ltm_recall_data_b, ltm_recall_data_x


@pytest.mark.parametrize("module", [ltm_recall_data, ltm_recall_data_b, ltm_recall_data_x])
def test_committed_set_is_what_the_generator_writes(module) -> None:
    committed = json.loads(module.OUT.read_text())
    assert committed == json.loads(json.dumps(module.generate(), ensure_ascii=False))
    by_id = {m["id"]: m for m in committed["memories"]}
    assert len(by_id) == len(committed["memories"])
    for q in committed["queries"]:
        assert all(by_id[r]["conversation"] == q["conversation"] for r in q["relevant"]), q
    assert {q["lang"] for q in committed["queries"]} == {"en", "zh"}


def test_set_b_states_no_fact_of_set_a() -> None:
    a = {m["text"] for m in ltm_recall_data.generate()["memories"] if m["role"] == "user"}
    set_b = ltm_recall_data_b.generate()
    b = {m["text"] for m in set_b["memories"] if m["role"] == "user"}
    relevant = {r for q in set_b["queries"] for r in q["relevant"]}
    labelled_b = {m["text"] for m in set_b["memories"] if m["id"] in relevant}
    assert labelled_b and not b & a
