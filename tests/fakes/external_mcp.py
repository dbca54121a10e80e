"""A fake vendor MCP server for the proxy's tests: tools named as another vendor names them,
one that no safety rule can be mapped onto, a screenshot as an image. Run as a stdio server."""

import io

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image
from PIL import Image as PILImage

server = MCPServer("fake-vendor")


@server.tool()
def type_text(text: str) -> str:
    return f"typed {len(text)} characters"


@server.tool()
def press_keys(keys: str) -> str:
    return f"pressed {keys}"


@server.tool()
def left_click(coordinate: list[int]) -> str:
    return f"clicked {coordinate}"


@server.tool()
def take_screenshot() -> Image:
    buffer = io.BytesIO()
    PILImage.new("RGB", (64, 40), (10, 120, 200)).save(buffer, format="JPEG")
    return Image(data=buffer.getvalue(), format="jpeg")


@server.tool()
def wiggle() -> str:
    """Does something no safety rule can be mapped onto."""
    return "wiggled"


if __name__ == "__main__":
    server.run("stdio")
