"""How the inspector draws media blocks: only http(s) URLs and inline data of the block's own
kind become links or thumbnails; anything else is shown as text."""

from __future__ import annotations

from agentscope_memory.message import AudioBlock, Base64Source, ImageBlock, URLSource
from agentscope_memory_server.inspector.app import _block_view


def test_only_safe_sources_are_linked() -> None:
    png = _block_view(ImageBlock(source=Base64Source(media_type="image/png", data="iVBORw0KGgo=")))
    assert png["url"] == "data:image/png;base64,iVBORw0KGgo="
    assert _block_view(ImageBlock(source=URLSource(url="https://example.com/a.png")))["url"] == "https://example.com/a.png"
    for source in (URLSource(url="javascript:alert(1)"), URLSource(url="file:///etc/passwd"),
                   Base64Source(media_type="text/html", data="PHNjcmlwdD4="),
                   Base64Source(media_type="image/svg+xml;charset=utf-8", data="PHN2Zz4=")):
        view = _block_view(ImageBlock(source=source))
        assert view["url"] is None and view["label"]
    assert _block_view(AudioBlock(source=Base64Source(media_type="image/png", data="AA==")))["url"] is None
