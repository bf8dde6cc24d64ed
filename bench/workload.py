"""What the benchmarks send: a realistic chat turn of a few hundred characters, and a shared
pool entry of the same size (a JSON note one agent leaves for the others)."""

from __future__ import annotations

import json

from google.protobuf.timestamp_pb2 import Timestamp

from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as mpb
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pool_pb
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.convert.to_proto import msg_to_proto

TEXT = (
    "Could you look up the weather for Paris for the next three days and tell me whether I "
    "should pack an umbrella? I land on Thursday morning and leave on Sunday evening. "
)


def message(i: int) -> mpb.Msg:
    return msg_to_proto(Msg.create(MsgRole.USER, f"{TEXT} (turn {i})", name="user"))


def pool_content(i: int) -> str:
    return json.dumps({"note": f"{TEXT} (turn {i})", "step": i, "owner": "planner"}, ensure_ascii=False)


def pool_entry(i: int) -> pool_pb.PoolEntry:
    """An entry as the server returns it after a write of `pool_content(i)`."""
    now = Timestamp(seconds=1_790_000_000)
    return pool_pb.PoolEntry(pool_id="bench-pool", key=f"note-{i}", content_json=pool_content(i), version=1,
                             created_by="planner", updated_by="planner", create_time=now, update_time=now,
                             metadata_json="{}")
