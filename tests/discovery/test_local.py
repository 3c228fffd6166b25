"""Attaching to a ``LocalDiscovery`` namespace: its segment, and what failures mean."""

from __future__ import annotations

import uuid

import pytest
from wool import LocalDiscovery
from wool.runtime.discovery.local import _short_hash

from wool_idle.discovery.attachment import FollowProblem, NamespaceMissing
from wool_idle.discovery.local import LocalAttachment, segment_inode, segment_name


class TestSegment:
    @pytest.mark.parametrize("namespace", ["demo1", "prod.eu-1", "a:b", "n" * 128])
    def test_segment_name_is_wools(self, namespace: str) -> None:
        """Given a namespace, then our segment name is the one wool 0.15 gives it (a
        wool that named it otherwise would make every namespace look missing)."""
        # Act / Assert
        assert segment_name(namespace) == _short_hash(namespace)

    def test_segment_inode_only_while_held(self, namespace: str) -> None:
        """Given a namespace, then it has a segment inode only while someone holds it."""
        # Act
        before = segment_inode(namespace)
        with LocalDiscovery(namespace):
            during = segment_inode(namespace)
        after = segment_inode(namespace)
        # Assert
        assert before is None and after is None
        assert isinstance(during, int)


class TestLocalAttachment:
    def test_attach_missing_namespace_raises(self, namespace: str) -> None:
        """Given no namespace, when attached, then NamespaceMissing is namespace_missing."""
        # Arrange
        attachment = LocalAttachment(namespace, poll_interval=0.5)
        # Act
        with pytest.raises(NamespaceMissing) as raised:
            attachment.attach()
        # Assert
        assert attachment.problem(raised.value) is FollowProblem.NAMESPACE_MISSING

    def test_detached_when_segment_replaced(self, namespace: str) -> None:
        """Given an attachment to a held namespace, when the namespace is created again
        by a new owner, then the attachment says it is detached; not before."""
        # Arrange
        attachment = LocalAttachment(namespace, poll_interval=0.5)
        with LocalDiscovery(namespace):
            attachment.attach()
            still = attachment.detached()
        # Act
        with LocalDiscovery(namespace):
            replaced = attachment.detached()
        # Assert
        assert still is False
        assert replaced is True

    @pytest.mark.parametrize(
        ("error", "problem"),
        [
            ("segment", FollowProblem.NAMESPACE_MISSING),
            ("block", FollowProblem.STALE_RECORD),
            ("other", FollowProblem.FAILED),
        ],
    )
    def test_problem_by_what_is_missing(self, error: str, problem: FollowProblem) -> None:
        """Given the errors wool raises reading a namespace, then a missing segment is
        namespace_missing, a missing worker block stale_record, anything else failed."""
        # Arrange
        attachment = LocalAttachment("ns", poll_interval=0.5)
        raised = {
            "segment": FileNotFoundError(2, "No such file", f"/{segment_name('ns')}"),
            "block": FileNotFoundError(2, "No such file", f"/{_short_hash(uuid.uuid4().hex)}"),
            "other": PermissionError(13, "denied"),
        }[error]
        # Act / Assert
        assert attachment.problem(raised) is problem
