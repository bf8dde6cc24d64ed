"""The messages benchmarks send: a realistic chat turn of a few hundred characters."""

from __future__ import annotations

from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as mpb
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.convert.to_proto import msg_to_proto

TEXT = (
    "Could you look up the weather for Paris for the next three days and tell me whether I "
    "should pack an umbrella? I land on Thursday morning and leave on Sunday evening. "
)


def message(i: int) -> mpb.Msg:
    return msg_to_proto(Msg.create(MsgRole.USER, f"{TEXT} (turn {i})", name="user"))
