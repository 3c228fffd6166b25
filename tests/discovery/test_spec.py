"""Which wool discovery to follow: ``local:NAMESPACE`` and ``lan:NAMESPACE``."""

from __future__ import annotations

import pytest

from wool_idle.discovery.spec import DiscoveryKind, DiscoverySpec


class TestDiscoverySpec:
    @pytest.mark.parametrize(
        ("text", "kind", "namespace"),
        [
            ("local:pool", DiscoveryKind.LOCAL, "pool"),
            ("lan:prod.eu-1", DiscoveryKind.LAN, "prod.eu-1"),
            ("local:a:b", DiscoveryKind.LOCAL, "a:b"),
            ("local:" + "n" * 128, DiscoveryKind.LOCAL, "n" * 128),
        ],
    )
    def test_parse_valid(self, text: str, kind: DiscoveryKind, namespace: str) -> None:
        """Given a kind and a namespace, when parsed, then both are kept, and the
        spec prints as it was written."""
        # Act
        spec = DiscoverySpec.parse(text)
        # Assert
        assert (spec.kind, spec.namespace) == (kind, namespace)
        assert str(spec) == text

    @pytest.mark.parametrize(
        "text",
        [
            "",
            "pool",
            "local",
            "local:",
            "dns:pool",
            "LOCAL:pool",
            "local: pool",
            "local:pool ",
            "local:a/b",
            "local:../etc",
            "local:-pool",
            "local:po\nol",
            "local:pool\n",  # "$" in a regex matches before a final newline
            "local:pööl",
            "local:" + "n" * 129,
        ],
    )
    def test_parse_invalid(self, text: str) -> None:
        """Given a text that is not kind:namespace with a safe namespace, when parsed,
        then ValueError names the text."""
        # Act / Assert
        with pytest.raises(ValueError, match="invalid discovery"):
            DiscoverySpec.parse(text)
