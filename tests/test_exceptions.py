"""The error tree: every error survives the pickle a worker sends it back in."""

from __future__ import annotations

import sys

import cloudpickle
import grpc
import pytest
from support.tasks import NameExitingType

from wool_idle import exceptions
from wool_idle.exceptions import (
    MalformedReply,
    NestedDispatchFailed,
    OutcomeTooLarge,
    RpcError,
    StopRefused,
    TaskAborted,
    TaskOutcomeLost,
    TransientRpcError,
)

ERRORS = [
    RpcError("idle", grpc.StatusCode.INTERNAL, "boom"),
    TransientRpcError("idle", grpc.StatusCode.UNAVAILABLE, "down"),
    StopRefused("stop", grpc.StatusCode.FAILED_PRECONDITION, "busy"),
    TaskOutcomeLost("dispatch", grpc.StatusCode.RESOURCE_EXHAUSTED, "too big"),
    MalformedReply("idle", "2-byte reply does not decode as IdleTime"),
    TaskAborted(SystemExit(3)),
    OutcomeTooLarge("result", 5_000_000, 4_194_304),
    NestedDispatchFailed(TransientRpcError("dispatch", grpc.StatusCode.UNAVAILABLE, "down")),
]


class TestErrorTree:
    @pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
    def test_pickle_round_trip_keeps_type_message_and_fields(
        self, error: exceptions.WoolError
    ) -> None:
        """Given an error of the tree (as a task on a worker may raise it), when it is
        pickled and loaded again, then its type, message and fields are the same."""
        # Act
        loaded = cloudpickle.loads(cloudpickle.dumps(error))
        # Assert
        assert type(loaded) is type(error)
        assert str(loaded) == str(error)
        fields = {k: v for k, v in vars(error).items() if k != "exception"}
        assert {k: v for k, v in vars(loaded).items() if k != "exception"} == fields

    def test_malformed_reply_is_internal_and_not_transient(self) -> None:
        """Given a MalformedReply, then it is an RpcError with code INTERNAL and not
        a TransientRpcError."""
        # Arrange
        error = MalformedReply("stop", "garbage")
        # Assert
        assert error.code is grpc.StatusCode.INTERNAL
        assert isinstance(error, RpcError) and not isinstance(error, TransientRpcError)

    def test_task_aborted_describes_an_abort_named_by_exit(self) -> None:
        """Given a BaseException whose repr and whose type's name (a metaclass's) call
        sys.exit, when TaskAborted carries it, then its message names it by type and
        address (reading the name exited, past the guard of the repr)."""

        class AbortNamedByExit(BaseException, metaclass=NameExitingType):
            def __repr__(self) -> str:
                sys.exit(9)

        # Act
        aborted = TaskAborted(AbortNamedByExit())
        # Assert
        assert str(aborted).startswith("task raised <failing repr of <")
        assert "AbortNamedByExit object at" in str(aborted)
