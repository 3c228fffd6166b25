"""The wire messages and the committed gencode."""

from __future__ import annotations

import math
import struct
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given
from hypothesis import strategies as st

from wool_idle import proto
from wool_idle.proto import generate


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
