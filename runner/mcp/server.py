"""The MCP server an agent gets: one episode's screen, mouse and keyboard, nothing else.

Tools take no VM id: the server is bound to one Display (and, for the opt-in file
tools, one GuestShell), so an agent cannot reach another machine. Tool names and
arguments follow the computer_use_* set agents already know. A bad argument is a tool
error the agent can read, never a crash of the server.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterable
from typing import Literal, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from PIL import Image as PILImage

from runner import __version__
from runner.display.base import Display
from runner.display.keys import keysym, modifier, parse_hotkey
from runner.errors import CommandTimeout, GuestUnreachable, UsageError
from runner.guest.agent import GuestAgent, GuestAgentError
from runner.guest.base import GuestShell
from runner.profiles import GuestProfile
from runner.profiles.parts import FILE_TOOL_ERRORS, FileTools
from runner.mcp.toolsets import DEFAULT_TOOLSETS, TOOLSETS, resolve_toolsets
from runner.mcp.trajectory import CURRENT_TOOL, StepLimitReached

T = TypeVar("T")

MAX_DOWNLOAD_BYTES = 10 * 2**20
MAX_SCROLL = 50  # wheel notches in one call


def build_server(display: Display, shell: GuestShell | None = None, *,
                 toolsets: tuple[str, ...] = DEFAULT_TOOLSETS, file_root: str | None = None,
                 guest: GuestProfile | None = None, guest_agent: GuestAgent | None = None) -> MCPServer:
    """GUEST (the profile) writes the file tools' scripts in the guest's own shell language (its FileTools part)."""
    allowed = set(resolve_toolsets(toolsets))
    files = None if guest is None else guest.part(FileTools)
    if allowed & set(TOOLSETS["files"]) and (shell is None or not file_root or guest is None):
        raise UsageError("the file tools need a guest shell, its profile and a root folder they are confined to")
    if allowed & set(TOOLSETS["files"]) and guest is not None and files is None:
        raise UsageError(f"the file tools need a guest with file tools, and {guest.name} guests have none",
                         fix="leave out --tools files")
    if allowed & set(TOOLSETS["accessibility"]) and guest_agent is None:
        raise UsageError("the accessibility tools need the image's guest agent, and this image has none",
                         fix="rebuild the image (cu-run image build NAME --force) or leave out --tools accessibility")
    server = MCPServer("cu-run", version=__version__,
                       instructions="The screen, mouse and keyboard of one virtual machine. Coordinates are "
                                    "screen pixels from the top left; take a screenshot to see the screen.")

    def tool(fn: Callable) -> Callable:
        if fn.__name__ in allowed:
            server.add_tool(fn, name=fn.__name__)
        return fn

    async def act(name: str, call: Callable[[], T]) -> T:
        def in_thread() -> T:
            CURRENT_TOOL.set(name)
            return call()

        try:
            return await anyio.to_thread.run_sync(in_thread)
        except (ValueError, StepLimitReached) as exc:
            raise ToolError(str(exc)) from exc
        except (GuestUnreachable, CommandTimeout) as exc:
            raise ToolError(f"the VM did not answer: {exc.message}") from exc
        except GuestAgentError as exc:
            raise ToolError(exc.message) from exc

    add_screen_tools(tool, act, display)
    add_mouse_tools(tool, act, display)
    add_keyboard_tools(tool, act, display)
    if guest_agent is not None:
        add_accessibility_tools(tool, act, guest_agent)
    if shell is not None and file_root and files is not None:
        add_file_tools(tool, act, shell, files, file_root)

    return server


Tool = Callable[[Callable], Callable]  # registers a tool if its set is allowed
Act = Callable  # runs a blocking call in a thread, its errors turned into tool errors


def add_screen_tools(tool: Tool, act: Act, display: Display) -> None:
    @tool
    async def computer_use_screenshot(scale: float = 1.0, format: Literal["png", "jpeg"] = "png",
                                      quality: int = 80) -> Image:
        """Take a screenshot of the whole screen. scale (0.1-1.0) shrinks it; format is png or jpeg
        (quality 1-95 for jpeg)."""
        _check_scale(scale, quality)
        png = await act("computer_use_screenshot", display.screenshot)
        return _encode(png, scale, format, quality)

    @tool
    async def computer_use_screenshot_region(x: int, y: int, width: int, height: int, scale: float = 1.0,
                                             format: Literal["png", "jpeg"] = "png", quality: int = 80) -> Image:
        """Take a screenshot of the rectangle whose top-left corner is (x, y)."""
        _check_scale(scale, quality)
        if width < 1 or height < 1:
            raise ToolError("width and height must be at least 1")
        png = await act("computer_use_screenshot_region", display.screenshot)
        image = PILImage.open(io.BytesIO(png))
        if x < 0 or y < 0 or x + width > image.width or y + height > image.height:
            raise ToolError(f"the region ({x}, {y}, {width}x{height}) is not inside the "
                            f"{image.width}x{image.height} screen")
        return _encode(image.crop((x, y, x + width, y + height)), scale, format, quality)

    @tool
    async def computer_use_display_info() -> dict:
        """The screen's width and height in pixels."""
        info = await act("computer_use_display_info", display.info)
        return {"width": info.width, "height": info.height}


def add_mouse_tools(tool: Tool, act: Act, display: Display) -> None:
    async def on_screen(name: str, *points: tuple[int, int]) -> None:
        # Refused before the call is recorded or sent: a point far off the screen is no action,
        # and it must not reach the trajectory the report draws from.
        for x, y in points:
            await act(name, lambda x=x, y=y: display.check_point(x, y))

    @tool
    async def computer_use_mouse_position() -> dict:
        """Where the pointer is (where the last mouse action left it)."""
        x, y = await act("computer_use_mouse_position", lambda: display.pointer)
        return {"x": x, "y": y}

    @tool
    async def computer_use_mouse_move(x: int, y: int) -> str:
        """Move the pointer to (x, y)."""
        await on_screen("computer_use_mouse_move", (x, y))
        await act("computer_use_mouse_move", lambda: display.move(x, y))
        return f"moved to ({x}, {y})"

    @tool
    async def computer_use_mouse_click(x: int, y: int, button: Literal["left", "right", "middle"] = "left",
                                       double: bool = False) -> str:
        """Click at (x, y) with button left, right or middle; double=true for a double click."""
        await on_screen("computer_use_mouse_click", (x, y))
        await act("computer_use_mouse_click", lambda: display.click(x, y, button, double=double))
        return f"{'double-' if double else ''}clicked {button} at ({x}, {y})"

    @tool
    async def computer_use_mouse_drag(start_x: int, start_y: int, end_x: int, end_y: int,
                                      button: Literal["left", "right", "middle"] = "left") -> str:
        """Press the button at (start_x, start_y), move to (end_x, end_y), release."""
        await on_screen("computer_use_mouse_drag", (start_x, start_y), (end_x, end_y))
        await act("computer_use_mouse_drag", lambda: display.drag(start_x, start_y, end_x, end_y, button))
        return f"dragged from ({start_x}, {start_y}) to ({end_x}, {end_y})"

    @tool
    async def computer_use_mouse_scroll(x: int, y: int, direction: Literal["up", "down", "left", "right"] = "down",
                                        amount: int = 3) -> str:
        """Scroll at (x, y): direction up, down, left or right, amount in wheel notches (1-50)."""
        if not 1 <= amount <= MAX_SCROLL:
            raise ToolError(f"amount is in wheel notches, 1 to {MAX_SCROLL}")
        await on_screen("computer_use_mouse_scroll", (x, y))
        await act("computer_use_mouse_scroll", lambda: display.scroll(x, y, direction, amount))
        return f"scrolled {direction} {amount} at ({x}, {y})"


def add_keyboard_tools(tool: Tool, act: Act, display: Display) -> None:
    @tool
    async def computer_use_keyboard_type(text: str, delay: int = 0) -> str:
        """Type text exactly as given (newline presses Enter). delay: milliseconds between keys (0-500)."""
        if not 0 <= delay <= 500:
            raise ToolError("delay is in milliseconds, 0 to 500")
        _refuse(lambda: [keysym(char) for char in text])
        await act("computer_use_keyboard_type", lambda: display.type(text, delay=delay / 1000 if delay else None))
        return f"typed {len(text)} characters"

    @tool
    async def computer_use_keyboard_press(key: str, modifiers: list[str] | None = None) -> str:
        """Press one key (enter, tab, escape, backspace, f1..f12, up, a, ...) with modifiers held
        (ctrl, shift, alt, super; only modifiers can be held)."""
        mods = _modifiers(modifiers or ())
        _refuse(lambda: keysym(key))
        await act("computer_use_keyboard_press", lambda: display.key(key, mods))
        return f"pressed {'+'.join(mods + (key,))}"

    @tool
    async def computer_use_keyboard_hotkey(keys: str) -> str:
        """Press a key combination written like ctrl+s or ctrl+shift+t: every part but the last is a modifier."""
        key, named = _refuse(lambda: parse_hotkey(keys))
        mods = _modifiers(named)
        await act("computer_use_keyboard_hotkey", lambda: display.key(key, mods))
        return f"pressed {keys}"


def _modifiers(names: Iterable[str]) -> tuple[str, ...]:
    """NAMES by their one names, each once, in order; a ToolError for any that is not a modifier
    (ctrl, shift, alt, super and their aliases), before anything is recorded or sent."""
    return tuple(dict.fromkeys(_refuse(lambda: [modifier(name) for name in names])))


def _refuse(check: Callable[[], T]) -> T:
    """CHECK's value; its ValueError (a bad argument) as the ToolError the agent reads."""
    try:
        return check()
    except ValueError as exc:
        raise ToolError(str(exc)) from None


def add_accessibility_tools(tool: Tool, act: Act, guest_agent: GuestAgent) -> None:
    @tool
    async def computer_use_windows() -> str:
        """The desktop's top-level windows: id, title, app, pid, focused, minimized and geometry
        (x, y, width, height of the window's content in screen pixels)."""
        windows = await act("computer_use_windows", guest_agent.windows)
        return _compact({"windows": [w.model_dump() for w in windows]})

    @tool
    async def computer_use_accessibility_tree(app: str | None = None, max_depth: int = 20,
                                              max_nodes: int = 500) -> str:
        """The accessibility tree of what is on screen: role, name, bounds [x, y, width, height],
        states (focused, selected, checked, editable, disabled...) and text, nested. app limits it to
        one application (as named in the tree); max_depth (1-50) and max_nodes (1-5000) bound it."""
        if not 1 <= max_depth <= 50 or not 1 <= max_nodes <= 5000:
            raise ToolError("max_depth must be 1-50 and max_nodes 1-5000")
        tree = await act("computer_use_accessibility_tree",
                         lambda: guest_agent.accessibility_tree(app, max_depth, max_nodes))
        return _compact(tree.model_dump(exclude_none=True, exclude_defaults=True))


def add_file_tools(tool: Tool, act: Act, shell: GuestShell, files: FileTools, file_root: str) -> None:
    """list_files and file_download, confined to FILE_ROOT, in the guest's own scripts (FILES)."""

    def confine(path: str) -> str:
        try:
            return files.confine(file_root, path)
        except ValueError as exc:
            raise ToolError(str(exc)) from None

    def refused(path: str, exit_code: int) -> None:
        if exit_code in FILE_TOOL_ERRORS:
            raise ToolError(f"{path} {FILE_TOOL_ERRORS[exit_code].format(root=file_root)}")
        if exit_code != 0:
            raise ToolError(f"listing {path} failed in the guest (exit {exit_code})")

    @tool
    async def list_files(path: str = ".") -> str:
        """List a folder inside the task's file root: type (f file, d folder), size, modified, name."""
        script = files.list_files_script(file_root, confine(path))
        result = await act("list_files", lambda: shell.run(script, timeout=30))
        refused(path, result.exit_code)
        return result.stdout or "(empty)"

    @tool
    async def file_download(path: str) -> str:
        """The contents of a text file inside the task's file root (up to 10 MiB)."""
        script = files.read_file_script(file_root, confine(path), MAX_DOWNLOAD_BYTES)
        result = await act("file_download", lambda: shell.run(script, timeout=60))
        refused(path, result.exit_code)
        data = base64.b64decode(result.stdout)
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise ToolError(f"{path} is not a text file ({len(data)} bytes)") from None


def _compact(data: object) -> str:
    """JSON without indentation: a tree of hundreds of nodes is what the model reads."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _check_scale(scale: float, quality: int) -> None:
    if not 0.1 <= scale <= 1.0:
        raise ToolError("scale must be between 0.1 and 1.0")
    if not 1 <= quality <= 95:
        raise ToolError("quality must be between 1 and 95")


def _encode(image: bytes | PILImage.Image, scale: float, format: str, quality: int) -> Image:
    if isinstance(image, bytes):
        if scale == 1.0 and format == "png":
            return Image(data=image, format="png")
        image = PILImage.open(io.BytesIO(image))
    if scale != 1.0:
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))
    buffer = io.BytesIO()
    if format == "jpeg":
        image.convert("RGB").save(buffer, format="JPEG", quality=quality)
    else:
        image.save(buffer, format="PNG")
    return Image(data=buffer.getvalue(), format=format)
