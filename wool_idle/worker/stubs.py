"""The Worker service's three methods on one channel, with replies that never
fail to decode inside gRPC.

gRPC logs a traceback and hands the caller ``None`` when a reply does not
parse. The stubs here decode it themselves: a reply that does not parse
arrives as ``Undecodable``, which ``decoded`` turns into ``MalformedReply``.
So does a status OK that came without a message (gRPC hands the decoder
``None``), and bytes that carry a field of the message with a wire type the
field cannot have: protobuf keeps such a field as unknown and reads the
field's default, so another message's bytes (a ``float`` where ``IdleTime``
has its ``double seconds``) would read as an idle time of 0, a busy worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar, overload

import grpc
from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from wool_idle.exceptions import MalformedReply
from wool_idle.proto import DISPATCH, IDLE, STOP, IdleTime, Request, Response, StopRequest, Void

M = TypeVar("M", bound=Message)


@dataclass(frozen=True)
class Undecodable:
    """A reply whose bytes are not the expected message."""

    expected: str
    size: int
    reason: str


def _decoder(message_type: type[M]) -> Callable[[bytes | None], M | Undecodable]:
    name = message_type.DESCRIPTOR.name
    fields = message_type.DESCRIPTOR.fields_by_number

    def decode(data: bytes | None) -> M | Undecodable:
        if data is None:
            return Undecodable(name, 0, "a status OK without a message")
        try:
            message = message_type.FromString(data)
        except DecodeError as error:
            return Undecodable(name, len(data), str(error))
        unknowns = UnknownFieldSet(message)
        for index in range(len(unknowns)):  # none, the usual case: no loop at all
            unknown = unknowns[index]
            field = fields.get(unknown.field_number)
            if field is not None:
                return Undecodable(
                    name, len(data), f"field {field.name} has wire type {unknown.wire_type}"
                )
        return message

    return decode


_REPLIES: dict[str, type[Message]] = {"idle": IdleTime, "stop": Void, "dispatch": Response}


@overload
def decoded(method: Literal["idle"], reply: object) -> IdleTime: ...
@overload
def decoded(method: Literal["stop"], reply: object) -> Void: ...
@overload
def decoded(method: Literal["dispatch"], reply: object) -> Response: ...
def decoded(method: str, reply: object) -> Message:
    """``reply`` as ``method``'s reply message, else ``MalformedReply``."""
    expected = _REPLIES[method]
    if isinstance(reply, expected):
        return reply
    if isinstance(reply, Undecodable):
        detail = f"{reply.size}-byte reply does not decode as {reply.expected}: {reply.reason}"
    else:
        detail = f"reply is a {type(reply).__name__}, not {expected.DESCRIPTOR.name}"
    raise MalformedReply(method, detail)


class Stubs:
    """Callables for ``idle``, ``stop`` and ``dispatch`` on ``channel``, and how
    many calls of one connection are using it."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.calls = 0
        self.released = False
        self.idle = channel.unary_unary(
            IDLE,
            request_serializer=Void.SerializeToString,
            response_deserializer=_decoder(IdleTime),
        )
        self.stop = channel.unary_unary(
            STOP,
            request_serializer=StopRequest.SerializeToString,
            response_deserializer=_decoder(Void),
        )
        # One request, sent with the call's headers and end of stream in one batch:
        # the method streams requests, but a stream_stream call writes its request
        # later, and when that write fails (the worker reset the stream: REFUSED_STREAM
        # as it closes) gRPC reports INTERNAL in place of the stream's own status.
        self.dispatch = channel.unary_stream(
            DISPATCH,
            request_serializer=Request.SerializeToString,
            response_deserializer=_decoder(Response),
        )
