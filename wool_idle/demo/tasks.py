"""The work the demo keeps its busy workers doing."""

from __future__ import annotations

import asyncio
import hashlib


async def crunch(seconds: float) -> str:
    """Hash for about ``seconds`` while yielding to the loop; return the digest."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    digest = b"wool"
    while loop.time() < end:
        for _ in range(200):
            digest = hashlib.sha256(digest).digest()
        await asyncio.sleep(0.005)
    return digest.hex()[:12]
