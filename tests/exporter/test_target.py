"""``Target``: one worker to scrape, and the digest of its labels."""

from __future__ import annotations

from dataclasses import replace

from wool_idle.exporter.target import Target, pool_digest


class TestTarget:
    def test_pool_digest_follows_the_labels_of_each_copy(self) -> None:
        """Given a target whose digest was asked for once, when a copy is made with
        other labels and another only marked regrouped, then each answers the digest
        of its own labels: a kept digest never outlives the labels it was made from."""
        # Arrange
        hot, cold = (("wool_tags", "hot"),), (("wool_tags", "cold"),)
        target = Target("w:1", hot)
        first = target.pool_digest()
        # Act
        moved = replace(target, labels=cold)
        marked = replace(target, regrouped=True)
        # Assert
        assert (first, target.pool_digest()) == (pool_digest(hot), pool_digest(hot))
        assert moved.pool_digest() == pool_digest(cold) != first
        assert marked.pool_digest() == first
