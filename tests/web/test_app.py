"""The routes every HTTP daemon serves: /, /-/healthy, /-/ready."""

from __future__ import annotations

from wool_idle.web.app import Landing, create_base_app


class TestCreateBaseApp:
    async def test_landing_page_links_and_body(self, aiohttp_client) -> None:
        """Given a landing page with links and a body, when / is fetched, then the
        title, every link (the health endpoints included) and the body, escaped as built."""
        # Arrange
        landing = Landing(title="wool-idle <test>", links=("/metrics",), body=lambda: "<p>x</p>")
        client = await aiohttp_client(create_base_app(landing, lambda: None))
        # Act
        response = await client.get("/")
        page = await response.text()
        # Assert
        assert response.content_type == "text/html"
        assert "<h1>wool-idle &lt;test&gt;</h1>" in page and "<p>x</p>" in page
        assert all(f'href="{p}"' in page for p in ("/metrics", "/-/healthy", "/-/ready"))

    async def test_ready_follows_readiness(self, aiohttp_client) -> None:
        """Given a daemon not ready yet, when /-/ready is fetched, then 503 with the
        reason; once ready, 200. /-/healthy is 200 throughout."""
        # Arrange
        reason: list[str | None] = ["warming up"]
        landing = Landing(title="t", links=())
        client = await aiohttp_client(create_base_app(landing, lambda: reason[0]))
        # Act
        before = await client.get("/-/ready")
        before_text = await before.text()
        healthy = await client.get("/-/healthy")
        reason[0] = None
        after = await client.get("/-/ready")
        # Assert
        assert (before.status, before_text) == (503, "warming up\n")
        assert healthy.status == 200
        assert after.status == 200
