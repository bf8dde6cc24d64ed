"""AgentScope-Java 2.x agent state: JSON values and lists under (tenant, user, session, key).

Every value and list has a head row in `agent_states` (`kind` is `value` or `list`) holding its
version, and for a list its length and size; a list's items are rows of `agent_state_items`
keyed by their index. Writes lock the head row first (`FOR UPDATE` on PostgreSQL; SQLite has one
writer), so a compare-and-set is atomic across replicas and a write's returned version is its
own. An append inserts only the new items: O(appended), not O(list).

A deleted value or list leaves a tombstone row holding its last version, and the key created
again starts after it (the tombstone goes): a key's versions never repeat, so a compare-and-set
holding the deleted version cannot land on the new value (ABA). Tombstones are not state:
nothing lists, counts or deletes them. A delete and a create of one key meet at the head row (the
delete holds its lock until it commits, its tombstone written), so the create sees the tombstone.

Tombstones older than a retention are pruned (`state_prune_tombstones`), or a service creating
and deleting sessions all day would keep a row per deleted key for ever. The versions they held
go into their tenant's version floor (one row per tenant, whatever it deleted), and a key created
without a tombstone starts above the floor: whatever was pruned, a version handed out before it
is never handed out again in the tenant. One floor per tenant, not per slot, because a slot's
floor would itself be the row per deleted session this bounds. The prune deletes a tombstone and
raises the floor in one transaction, and a create that finds the tombstone being pruned waits for
that transaction on its row (PostgreSQL) and then reads the floor it committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentscope_memory.store.base import StateHead, StateWrite
from agentscope_memory.store.sql.base import SqlTxBase

VALUE = "value"
LIST = "list"
# A marker row, not state: the slot's list `key` no longer resumes a 1.x memory (it was deleted
# through the agent-state API). Never listed, counted or deleted with the slot; it goes with the
# 1.x memory (the index `agent_states_detached` in schema.py has this value in its predicate).
DETACHED = "detached"
# The tombstone of a deleted value or list: its last version, so the key goes on from it.
TOMBSTONE = {VALUE: "deleted value", LIST: "deleted list"}
# The tenant's version floor (`user_id`, `session_id` and `key` empty: no slot has an empty
# session id): every version a pruned tombstone held is at most this.
FLOOR = "version floor"
# Only these rows are state; DETACHED, TOMBSTONE and FLOOR rows are bookkeeping.
_LIVE = f"kind IN ('{VALUE}', '{LIST}')"
# Written as the tombstone index's predicate (`schema.py`), so both databases use that index.
_BURIED = f"kind IN ('{TOMBSTONE[VALUE]}', '{TOMBSTONE[LIST]}')"

# Items read per statement while filling a page up to its byte budget.
_READ_CHUNK = 32


_PK = "tenant = ? AND user_id = ? AND session_id = ? AND kind = ? AND key = ?"
_HEAD = "SELECT version, length, size, update_time FROM {agent_states} WHERE " + _PK


class AgentStateStatements(SqlTxBase):
    def _order(self, column: str) -> str:
        # Ids come back in code point order on both databases: SQLite compares text bytewise
        # (UTF-8), PostgreSQL by the database's collation unless told "C".
        return f'{column} COLLATE "C"' if self._dialect.name == "postgres" else column

    def state_head(self, user_id: str, session_id: str, kind: str, key: str) -> StateHead | None:
        row = self._one(_HEAD, (self.tenant, user_id, session_id, kind, key))
        return None if row is None else StateHead(int(row[0]), int(row[1]), int(row[2]), float(row[3]))

    def state_value(self, user_id: str, session_id: str, key: str) -> tuple[str, int] | None:
        row = self._one(
            "SELECT value, version FROM {agent_states} WHERE " + _PK,
            (self.tenant, user_id, session_id, VALUE, key),
        )
        return None if row is None else (row[0], int(row[1]))

    def state_value_within(
        self, user_id: str, session_id: str, key: str, max_bytes: int
    ) -> tuple[str | None, int, int] | None:
        row = self._one(
            "SELECT CASE WHEN size <= ? THEN value END, version, size FROM {agent_states} WHERE " + _PK,
            (max_bytes, self.tenant, user_id, session_id, VALUE, key),
        )
        return None if row is None else (row[0], int(row[1]), int(row[2]))

    def _lock_head(self, pk: tuple[Any, ...]) -> StateHead | None:
        row = self._one(_HEAD + "{row_lock}", pk)
        return None if row is None else StateHead(int(row[0]), int(row[1]), int(row[2]), float(row[3]))

    def _claim(
        self, pk: tuple[Any, ...], expected: int | None, expected_length: int | None, now: float
    ) -> tuple[StateWrite, StateHead | None]:
        """Lock (or create) the head row and check the conditions. Returns the outcome (with the
        new version when ok) and the head as it was before (None when it did not exist)."""
        head = self._lock_head(pk)
        if head is None:
            if (expected is not None and expected != 0) or (expected_length not in (None, 0)):
                return StateWrite(False, 0, 0), None
            # Creates the head, or locks the one another replica created since our read, in one
            # statement: read-then-insert could lose twice in a row to creates and deletes
            # racing on PostgreSQL, and answered an unconditional write ABORTED (or INTERNAL).
            # Version 0 marks our own insert: a committed head is never at 0 (the caller sets
            # the version before this transaction commits).
            row = self._one(
                "INSERT INTO {agent_states} (tenant, user_id, session_id, kind, key, value,"
                " version, length, size, update_time) VALUES (?, ?, ?, ?, ?, NULL, 0, 0, 0, ?)"
                " ON CONFLICT (tenant, user_id, session_id, kind, key) DO UPDATE SET"
                " version = {agent_states}.version RETURNING version, length, size, update_time",
                (*pk, now),
            )
            if int(row[0]) == 0:
                # A deleted key goes on from its tombstone's version (ABA, see the module doc).
                tomb = self._one(
                    "DELETE FROM {agent_states} WHERE " + _PK + " RETURNING version",
                    (*pk[:3], TOMBSTONE[pk[3]], pk[4]),
                )
                # Without one (never deleted, or its tombstone pruned) it starts above the
                # tenant's floor.
                start = int(tomb[0]) if tomb is not None else self._state_floor()
                return StateWrite(True, start + 1, 0), None
            head = StateHead(int(row[0]), int(row[1]), int(row[2]), float(row[3]))
        if (expected is not None and expected != head.version) or (
            expected_length is not None and expected_length != head.length
        ):
            return StateWrite(False, head.version, head.length), head
        return StateWrite(True, head.version + 1, head.length), head

    def _state_floor(self) -> int:
        row = self._one("SELECT version FROM {agent_states} WHERE " + _PK, (self.tenant, "", "", FLOOR, ""))
        return 0 if row is None else int(row[0])

    def state_put_value(
        self, user_id: str, session_id: str, key: str, json_text: str, size: int,
        expected: int | None, now: float,
    ) -> StateWrite:
        pk = (self.tenant, user_id, session_id, VALUE, key)
        outcome, _ = self._claim(pk, expected, None, now)
        if outcome.ok:
            self._execute(
                "UPDATE {agent_states} SET value = ?, version = ?, size = ?, update_time = ? WHERE " + _PK,
                (json_text, outcome.version, size, now, *pk),
            )
        return outcome

    def state_put_list(
        self, user_id: str, session_id: str, key: str, items: Sequence[str], size: int,
        expected: int | None, now: float,
    ) -> StateWrite:
        pk = (self.tenant, user_id, session_id, LIST, key)
        outcome, head = self._claim(pk, expected, None, now)
        if not outcome.ok:
            return outcome
        if head is not None and head.length:
            self._execute(
                "DELETE FROM {agent_state_items} WHERE tenant = ? AND user_id = ? AND session_id = ?"
                " AND key = ?",
                (self.tenant, user_id, session_id, key),
            )
        self._insert_items(user_id, session_id, key, 0, items)
        self._execute(
            "UPDATE {agent_states} SET version = ?, length = ?, size = ?, update_time = ? WHERE " + _PK,
            (outcome.version, len(items), size, now, *pk),
        )
        return StateWrite(True, outcome.version, len(items))

    def state_append_list(
        self, user_id: str, session_id: str, key: str, items: Sequence[str], size: int,
        expected_length: int, expected: int | None, now: float,
    ) -> StateWrite:
        pk = (self.tenant, user_id, session_id, LIST, key)
        outcome, head = self._claim(pk, expected, expected_length, now)
        if not outcome.ok:
            return outcome
        old_size = head.size if head is not None else 0
        self._insert_items(user_id, session_id, key, expected_length, items)
        length = expected_length + len(items)
        self._execute(
            "UPDATE {agent_states} SET version = ?, length = ?, size = ?, update_time = ? WHERE " + _PK,
            (outcome.version, length, old_size + size, now, *pk),
        )
        return StateWrite(True, outcome.version, length)

    def _insert_items(
        self, user_id: str, session_id: str, key: str, first: int, items: Sequence[str]
    ) -> None:
        if items:
            self._many(
                "INSERT INTO {agent_state_items} (tenant, user_id, session_id, key, idx, value)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(self.tenant, user_id, session_id, key, first + i, item) for i, item in enumerate(items)],
            )

    def state_read_list(
        self, user_id: str, session_id: str, key: str, offset: int, max_items: int, max_bytes: int
    ) -> list[str]:
        """Items from index `offset`: at most `max_items`, and no more than `max_bytes` of UTF-8
        unless the first item alone is larger (a page always makes progress)."""
        out: list[str] = []
        used = 0
        while len(out) < max_items:
            want = min(_READ_CHUNK, max_items - len(out))
            rows = self._all(
                "SELECT value FROM {agent_state_items} WHERE tenant = ? AND user_id = ?"
                " AND session_id = ? AND key = ? AND idx >= ? ORDER BY idx LIMIT ?",
                (self.tenant, user_id, session_id, key, offset + len(out), want),
            )
            for (value,) in rows:
                n = len(value.encode("utf-8"))
                if out and used + n > max_bytes:
                    return out
                out.append(value)
                used += n
            if len(rows) < want:
                break
        return out

    def state_slot_exists(self, user_id: str, session_id: str) -> bool:
        row = self._one(
            "SELECT 1 FROM {agent_states} WHERE tenant = ? AND user_id = ? AND session_id = ?"
            f" AND {_LIVE} LIMIT 1",
            (self.tenant, user_id, session_id),
        )
        return row is not None

    def _bury(self, user_id: str, session_id: str, deleted: list[Any], now: float) -> int:
        """Tombstones for deleted (kind, key, version) rows; returns how many there were."""
        if deleted:
            # Never lowers one: a tombstone only ever follows a head of a higher version.
            self._many(
                "INSERT INTO {agent_states} (tenant, user_id, session_id, kind, key, value, version,"
                " length, size, update_time) VALUES (?, ?, ?, ?, ?, NULL, ?, 0, 0, ?)"
                " ON CONFLICT (tenant, user_id, session_id, kind, key) DO UPDATE SET"
                " version = excluded.version, update_time = excluded.update_time"
                " WHERE {agent_states}.version < excluded.version",
                [(self.tenant, user_id, session_id, TOMBSTONE[kind], key, int(version), now)
                 for kind, key, version in deleted],
            )
        return len(deleted)

    def state_delete_slot(self, user_id: str, session_id: str, now: float) -> int:
        self._execute(
            "DELETE FROM {agent_state_items} WHERE tenant = ? AND user_id = ? AND session_id = ?",
            (self.tenant, user_id, session_id),
        )
        deleted = self._all(
            "DELETE FROM {agent_states} WHERE tenant = ? AND user_id = ? AND session_id = ?"
            f" AND {_LIVE} RETURNING kind, key, version",
            (self.tenant, user_id, session_id),
        )
        return self._bury(user_id, session_id, deleted, now)

    def state_detach_legacy(self, user_id: str, session_id: str, key: str, now: float) -> None:
        """Marks the slot's list `key` as no longer resumed from a 1.x memory."""
        self._execute(
            "INSERT INTO {agent_states} (tenant, user_id, session_id, kind, key, value, version, length,"
            " size, update_time) VALUES (?, ?, ?, ?, ?, NULL, 1, 0, 0, ?)"
            " ON CONFLICT (tenant, user_id, session_id, kind, key) DO NOTHING",
            (self.tenant, user_id, session_id, DETACHED, key, now),
        )

    def state_forget_detachments(self, session_id: str) -> None:
        """Drops every slot's marker against the 1.x memory `session_id`, which is being deleted:
        a memory made anew under that id is another conversation, which the slot resumes."""
        self._execute(
            # The kind written out, as in the index's predicate, so PostgreSQL's generic plan
            # uses that index too.
            f"DELETE FROM {{agent_states}} WHERE tenant = ? AND session_id = ? AND kind = '{DETACHED}'",
            (self.tenant, session_id),
        )

    def state_legacy_detached(self, user_id: str, session_id: str, key: str) -> bool:
        return self._one("SELECT 1 FROM {agent_states} WHERE " + _PK, (self.tenant, user_id, session_id, DETACHED, key)) is not None

    def state_delete_key(self, user_id: str, session_id: str, kind: str, key: str, now: float) -> int:
        if kind == LIST:
            self._execute(
                "DELETE FROM {agent_state_items} WHERE tenant = ? AND user_id = ? AND session_id = ?"
                " AND key = ?",
                (self.tenant, user_id, session_id, key),
            )
        deleted = self._all(
            "DELETE FROM {agent_states} WHERE " + _PK + " RETURNING kind, key, version",
            (self.tenant, user_id, session_id, kind, key),
        )
        return self._bury(user_id, session_id, deleted, now)

    def state_prune_tombstones(self, before: float, limit: int, now: float) -> int:
        """Cross-tenant housekeeping: deletes at most `limit` tombstones written before `before`,
        raising each one's tenant floor to its version in the same transaction; returns how many.
        On PostgreSQL it skips tombstones another transaction holds (a create taking one over,
        another replica's prune) rather than waiting for them."""
        rows = self._all(
            f"DELETE FROM {{agent_states}} WHERE {_BURIED} AND update_time < ?"
            " AND (tenant, user_id, session_id, kind, key) IN (SELECT tenant, user_id, session_id, kind, key"
            f" FROM {{agent_states}} WHERE {_BURIED} AND update_time < ? LIMIT ?{{claim_lock}})"
            " RETURNING tenant, version",
            (before, before, limit),
        )
        floors: dict[str, int] = {}
        for tenant, version in rows:
            floors[tenant] = max(floors.get(tenant, 0), int(version))
        if floors:
            # Tenants in one order: two replicas pruning at once never wait on each other's
            # floors crosswise (a deadlock). A floor never goes down.
            self._many(
                "INSERT INTO {agent_states} (tenant, user_id, session_id, kind, key, value, version,"
                " length, size, update_time) VALUES (?, '', '', ?, '', NULL, ?, 0, 0, ?)"
                " ON CONFLICT (tenant, user_id, session_id, kind, key) DO UPDATE SET"
                " version = excluded.version, update_time = excluded.update_time"
                " WHERE {agent_states}.version < excluded.version",
                [(tenant, FLOOR, floors[tenant], now) for tenant in sorted(floors)],
            )
        return len(rows)

    def state_keys(
        self, user_id: str, session_id: str, after: tuple[str, str] | None = None, limit: int = 1000
    ) -> list[tuple[str, str]]:
        """(kind, key) of what a slot holds, by key then kind (`list` before `value`), after
        `after` = (kind, key)."""
        key = self._order("key")
        where = f"tenant = ? AND user_id = ? AND session_id = ? AND {_LIVE}"
        params: list[Any] = [self.tenant, user_id, session_id]
        if after is not None:
            where += f" AND ({key} > ? OR (key = ? AND kind > ?))"
            params += [after[1], after[1], after[0]]
        rows = self._all(
            f"SELECT kind, key FROM {{agent_states}} WHERE {where} ORDER BY {key}, kind LIMIT ?",
            (*params, limit),
        )
        return [(r[0], r[1]) for r in rows]

    def state_session_ids(self, user_id: str, after: str | None, limit: int) -> list[str]:
        session = self._order("session_id")
        where, params = f"tenant = ? AND user_id = ? AND {_LIVE}", [self.tenant, user_id]
        if after is not None:
            where, params = where + f" AND {session} > ?", params + [after]
        rows = self._all(
            f"SELECT session_id FROM {{agent_states}} WHERE {where} GROUP BY session_id ORDER BY {session} LIMIT ?",
            (*params, limit),
        )
        return [r[0] for r in rows]
