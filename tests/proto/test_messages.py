"""The wire messages and the committed gencode."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Final

import pytest
import wool.protocol
from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given
from hypothesis import strategies as st

from wool_idle import proto
from wool_idle.proto import generate

PROTOCOL_DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
EXTENSIONS_FROM: Final = 10000
"""Field numbers of our extensions start here (DESIGN.md, wire contract)."""


class TestMessageConstruction:
    def test_idle_time_with_and_without_seconds(self) -> None:
        """Given an IdleTime message, when constructed with and without a seconds
        value, then the field holds the value and defaults to 0.0."""
        # Arrange / Act
        given_value = proto.IdleTime(seconds=12.5)
        default = proto.IdleTime()
        # Assert
        assert given_value.seconds == 12.5
        assert default.seconds == 0.0

    @given(st.floats(allow_nan=True, allow_infinity=True))
    def test_idle_time_round_trip_any_double(self, seconds: float) -> None:
        """Given any double, when an IdleTime is serialized and re-parsed, then the
        seconds field survives the round-trip exactly (bit for bit)."""
        # Arrange
        message = proto.IdleTime(seconds=seconds)
        # Act
        parsed = proto.IdleTime.FromString(message.SerializeToString())
        # Assert
        assert struct.pack("<d", parsed.seconds) == struct.pack("<d", seconds) or (
            math.isnan(seconds) and math.isnan(parsed.seconds)
        )

    def test_stop_request_extension_is_optional(self) -> None:
        """Given a StopRequest, when if_idle_for is unset or set to 0, then presence
        is distinguishable (0 is a real condition, not 'unset')."""
        # Arrange / Act
        plain = proto.StopRequest(timeout=5.0)
        conditional = proto.StopRequest(timeout=5.0, if_idle_for=0.0)
        # Assert
        assert not plain.HasField("if_idle_for")
        assert conditional.HasField("if_idle_for")


def wool_idle_message() -> type:
    """A message shaped like wool's ``Idle``: only ``double seconds = 1``."""
    file = descriptor_pb2.FileDescriptorProto(name="wool_shape.proto", package="shape")
    message = file.message_type.add(name="Idle")
    message.field.add(
        name="seconds",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shape.Idle"))


class TestIdleExtension:
    def test_conditional_stop_is_an_extension_field(self) -> None:
        """Given IdleTime, then conditional_stop sits on field 10002 (an extension
        number, >= 10000) and seconds keeps wool's field 1."""
        # Arrange
        fields = proto.IdleTime.DESCRIPTOR.fields_by_name
        # Assert
        assert fields["conditional_stop"].number == 10002
        assert fields["seconds"].number == 1

    def test_wool_shaped_reply_reads_as_not_honoured(self) -> None:
        """Given the bytes of a wool-shaped idle reply (seconds only), when parsed as
        IdleTime, then the seconds survive and conditional_stop is False."""
        # Arrange
        theirs = wool_idle_message()(seconds=12.5).SerializeToString()
        # Act
        ours = proto.IdleTime.FromString(theirs)
        # Assert
        assert (ours.seconds, ours.conditional_stop) == (12.5, False)

    def test_our_reply_reads_in_wool_shape(self) -> None:
        """Given our idle reply with conditional_stop set, when parsed by a
        wool-shaped message, then it reads the seconds and ignores the extension."""
        # Arrange
        ours = proto.IdleTime(seconds=3.25, conditional_stop=True).SerializeToString()
        # Act
        theirs = wool_idle_message().FromString(ours)
        # Assert
        assert theirs.seconds == 3.25
        assert theirs.SerializeToString() == ours


class TestGencode:
    def test_committed_gencode_matches_proto(self) -> None:
        """Given worker.proto, when the gencode is rendered again, then it equals the
        committed files (regenerate with ``python -m wool_idle.proto.generate``)."""
        # Arrange
        directory = Path(generate.__file__).parent
        # Act
        rendered = generate.render()
        # Assert
        for name, text in rendered.items():
            assert (directory / name).read_text() == text, f"{name} is out of date"

    def test_messages_live_outside_the_default_pool(self) -> None:
        """Given the generated messages, when the default descriptor pool is asked for
        them, then it does not know them (so wool's own file can register there)."""
        # Arrange
        pool = proto.IdleTime.DESCRIPTOR.file.pool
        # Act
        default = descriptor_pool.Default()
        # Assert
        assert pool is not default
        assert proto.IdleTime.DESCRIPTOR.full_name == "wool.runtime.protobuf.wire.IdleTime"

    def test_method_paths_equal_wools(self) -> None:
        """Given the method path constants, then they are wool's paths exactly."""
        # Assert
        assert proto.IDLE == "/wool.runtime.protobuf.wire.Worker/idle"
        assert proto.STOP == "/wool.runtime.protobuf.wire.Worker/stop"
        assert proto.DISPATCH == "/wool.runtime.protobuf.wire.Worker/dispatch"


def wools_service() -> descriptor.ServiceDescriptor:
    """wool's own ``Worker`` service, as the installed ``wool`` package registers it."""
    assert wool.protocol.StopRequest.DESCRIPTOR.file.pool is descriptor_pool.Default()
    return descriptor_pool.Default().FindServiceByName(proto.SERVICE)


class TestWireAgainstWool:
    def test_methods_equal_wools(self) -> None:
        """Given wool's own Worker service (the installed wool package), then ours has
        the same methods, each as unary or streaming as wool's."""
        # Arrange
        theirs = wools_service()
        ours = proto.IdleTime.DESCRIPTOR.file.services_by_name["Worker"]
        # Act
        shapes = [
            {m.name: (m.client_streaming, m.server_streaming) for m in service.methods}
            for service in (ours, theirs)
        ]
        # Assert
        assert ours.full_name == theirs.full_name
        assert shapes[0] == shapes[1]

    @pytest.mark.parametrize("method", ["idle", "stop"])
    def test_idle_and_stop_messages_keep_wools_fields(self, method: str) -> None:
        """Given wool's idle and stop messages, then each of our request and reply
        messages has every wool field with wool's number, type and cardinality, and any
        field beyond them is an extension (number >= 10000) that docs/protocol.md
        lists (wool's own fields are never reused or retyped)."""
        # Arrange
        theirs = wools_service().methods_by_name[method]
        ours = proto.IdleTime.DESCRIPTOR.file.services_by_name["Worker"].methods_by_name[method]
        documented = PROTOCOL_DOC.read_text()
        pairs = [(ours.input_type, theirs.input_type), (ours.output_type, theirs.output_type)]
        for our_message, their_message in pairs:
            # Act
            wools = {f.number: (f.type, f.is_repeated) for f in their_message.fields}
            kept = {n: (f.type, f.is_repeated) for n, f in our_message.fields_by_number.items()}
            extensions = [f for f in our_message.fields if f.number not in wools]
            # Assert
            assert {n: kept.get(n) for n in wools} == wools, our_message.full_name
            for field in extensions:
                named = f"{our_message.name}.{field.name}"
                assert field.number >= EXTENSIONS_FROM, named
                assert f"`{named}` ({field.number}," in documented, named
