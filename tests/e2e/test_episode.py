"""One real episode VM: shell, screen, mouse, keyboard, isolation, and nothing left after."""

import socket
import subprocess
import threading
import time

import pytest
from vmtools import guest_file, wait_focused, wait_for

from runner.errors import CommandTimeout
from runner.guest.qga import QemuAgentShell
from runner.images.catalog import sha256_file
from runner.display.keys import keysym
from runner.vm.episode import EpisodeOptions, EpisodeVM
from runner.screen import color_fraction, is_blank, png_size
from runner.profiles import get_profile
from runner.vm.selfcheck import run_selfcheck
from runner.profiles.parts import Probes

TERMINAL_POINT = get_profile("linux").part(Probes).desktop_probe.terminal_point


@pytest.fixture(scope="module")
def episode(host, linux_image, settings, accel):
    golden_before = sha256_file(linux_image.disk)
    vm = EpisodeVM(host, linux_image, settings, run_id="e2e" + str(int(time.time()) % 100000), slot=0,
                   options=EpisodeOptions(accel=accel))
    with vm:
        yield vm
    # After teardown: no domain, no overlay, the golden disk untouched.
    assert host.lookup(vm.name) is None
    assert not vm.workdir.exists()
    assert sha256_file(linux_image.disk) == golden_before


def test_shell_runs_commands(episode):
    result = episode.shell.run("uname -a", timeout=30)
    assert result.exit_code == 0
    assert result.stdout.startswith("Linux cu-guest ")


def test_overlay_backs_onto_the_read_only_golden_disk(episode, linux_image):
    from runner.hypervisor.overlay import backing_file

    assert backing_file(episode.workdir / "overlay.qcow2") == linux_image.disk.resolve()
    assert linux_image.disk.stat().st_mode & 0o222 == 0


def test_typed_command_in_the_terminal_reaches_the_guest(episode):
    episode.shell.run("rm -f /tmp/typed", timeout=60)
    episode.display.click(*TERMINAL_POINT)
    wait_focused(episode, "XTerm")
    episode.display.type("echo hello-cu > /tmp/typed\n")
    assert guest_file(episode, "/tmp/typed") == "hello-cu\n"


def test_a_key_released_late_types_once(episode):
    """Under load a key's release can reach the guest late. With X's autorepeat on, the guest
    would type the key again and again until it came: letters the agent typed once."""
    episode.shell.run("rm -f /tmp/held", timeout=60)
    episode.display.click(*TERMINAL_POINT)
    wait_focused(episode, "XTerm")
    episode.display.type("echo ")
    held = keysym("x")
    episode.display._call("keysymEvent", held, True)  # the Display API has no separate down and up
    time.sleep(1.5)  # the release comes late: past X's autorepeat delay (660 ms by default)
    episode.display._call("keysymEvent", held, False)
    episode.display.type(" > /tmp/held\n")
    assert guest_file(episode, "/tmp/held") == "x\n"


def test_screenshot_shows_the_desktop_at_its_size(episode, linux_image):
    png = episode.display.screenshot()
    screen = linux_image.manifest.screen
    assert png_size(png) == (screen.width, screen.height)
    assert not is_blank(png)
    assert color_fraction(png, linux_image.manifest.desktop_color) > 0.15


def test_vnc_capture_matches_the_fast_capture(episode):
    from runner.display.vnc import VncDisplay

    assert isinstance(episode.display, VncDisplay)
    vnc_png = episode.display.screenshot_vnc()
    assert png_size(vnc_png) == png_size(episode.display.screenshot())


def test_selfcheck_passes(episode, tmp_path):
    results = run_selfcheck(episode, tmp_path)
    failed = [f"{r.name}: {r.detail}" for r in results if not r.ok]
    assert not failed, failed
    assert (tmp_path / "screenshot.png").exists()


def test_out_of_screen_click_is_refused_before_sending(episode):
    with pytest.raises(ValueError, match="outside"):
        episode.display.click(5000, 10)


def _host_ip() -> str:
    out = subprocess.run(["ip", "-4", "-o", "route", "get", "1.1.1.1"], capture_output=True, text=True).stdout
    words = out.split()
    return words[words.index("src") + 1] if "src" in words else ""


def test_guest_network_reaches_nothing_but_the_forwarded_shell(episode):
    # The guest's network is up (DHCP from QEMU's user network worked) ...
    addr = episode.shell.run("ip -4 -o addr show scope global", timeout=60).stdout
    assert "10.0.2.15" in addr, addr

    # ... yet a listener on this host, on loopback and on the host's own address, is unreachable.
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    accepted = []

    def accept():
        listener.settimeout(15)
        try:
            while True:
                accepted.append(listener.accept()[0])
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        # Sanity: the listener answers from the host itself.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        targets = ["10.0.2.2", "10.0.2.3"] + ([_host_ip()] if _host_ip() else [])
        probe = "\n".join(
            f"python3 -c \"import socket\ntry:\n socket.create_connection(('{t}', {port}), timeout=3); print('{t} OPEN')\n"
            f"except OSError as e: print('{t} closed', e)\""
            for t in targets
        )
        output = episode.shell.run(probe, timeout=60).stdout
    finally:
        listener.close()
        thread.join()
    assert "OPEN" not in output, output
    assert len(accepted) == 1, f"{len(accepted)} connections reached the host listener; only the host's own sanity check should"
    assert output.count("closed") == len(targets)


def test_vnc_needs_the_episodes_password(episode):
    """Nobody but the run drives the episode: a VNC client without the password is refused, one
    with it gets a frame. The password is in the domain only where libvirt keeps secrets."""
    import libvirt

    from runner.display.vnc import VncDisplay
    from runner.errors import GuestUnreachable

    host, port = episode.endpoints.vnc.split(":")
    for password in (None, "wrong123"):
        with pytest.raises(GuestUnreachable):
            VncDisplay(host, int(port), timeout=15, password=password).screenshot_vnc()
    right = VncDisplay(host, int(port), timeout=30, password=episode.vnc_password)
    try:
        assert png_size(right.screenshot_vnc()) == (1280, 800)
    finally:
        right.close()
    dom = episode.host.lookup(episode.name)
    assert episode.vnc_password not in dom.XMLDesc(0)
    assert f"passwd='{episode.vnc_password}'" in dom.XMLDesc(libvirt.VIR_DOMAIN_XML_SECURE)
    assert len(episode.vnc_password) == 8 and episode.endpoints.as_json()["vnc_password"] == episode.vnc_password


def test_the_episodes_files_are_the_runners_alone(episode, linux_image):
    assert episode.workdir.stat().st_mode & 0o777 == 0o700
    keys = linux_image.folder / "keys"
    assert keys.stat().st_mode & 0o777 == 0o700
    assert all(k.stat().st_mode & 0o777 == 0o600 for k in keys.iterdir() if not k.name.endswith(".pub"))
    assert (linux_image.folder / "manifest.json").stat().st_mode & 0o777 == 0o600


def test_the_admin_channel_is_root_with_a_clean_environment_out_of_the_desktop_users_reach(episode):
    admin = episode.admin_shell.run("id -u; echo \"$PATH\"; env | cut -d= -f1 | sort | tr '\\n' ' '", timeout=30)
    uid, path, names = admin.stdout.splitlines()
    assert uid == "0" and path == "/usr/sbin:/usr/bin:/sbin:/bin"
    assert set(names.split()) <= {"PATH", "HOME", "LANG", "LC_ALL", "PWD", "OLDPWD", "SHLVL", "_"}, names
    user = episode.shell.run("id -un; sudo -n true; echo sudo=$?; cat /proc/sys/kernel/yama/ptrace_scope", timeout=30)
    assert user.stdout.split() == ["cu", "sudo=1", "1"], user
    staged = episode.admin_shell.run("umask 077; mkdir -p /run/cu-task && echo secret > /run/cu-task/verify.sh",
                                     timeout=30)
    assert staged.ok
    peek = episode.shell.run("cat /run/cu-task/verify.sh; ls /run/cu-task", timeout=30)
    assert "secret" not in peek.stdout and "Permission denied" in peek.stderr
    episode.admin_shell.run("rm -rf /run/cu-task", timeout=30)


def test_the_admin_channel_is_the_qemu_guest_agent_which_the_desktop_user_cannot_reach(episode):
    assert episode.image.manifest.qemu_agent
    assert isinstance(episode.admin_shell, QemuAgentShell)
    # Output far over libvirt's 4 MiB message comes back whole, and the channel stays up after.
    big = episode.admin_shell.run("head -c 9000000 /dev/zero | tr '\\0' z; echo; echo err >&2; exit 5", timeout=60)
    assert (big.exit_code, len(big.stdout), big.stderr) == (5, 9_000_001, "err\n")
    # A timed-out command is killed in the guest.
    with pytest.raises(CommandTimeout):
        episode.admin_shell.run("echo $$ > /root/timed-out.pid; exec sleep 300", timeout=2)
    pid = episode.admin_shell.run("cat /root/timed-out.pid", timeout=30).stdout.strip()
    wait_for(lambda: not episode.admin_shell.run(f"kill -0 {pid}", timeout=30).ok, 20, "the timed-out command to die")
    # The desktop user can neither open the agent's port nor read the spool of its output.
    peek = episode.shell.run("echo '{}' > /dev/virtio-ports/org.qemu.guest_agent.0; ls /var/lib/cu-admin", timeout=30)
    assert peek.exit_code != 0 and peek.stderr.count("Permission denied") == 2, peek


def test_as_user_in_a_verifier_runs_as_the_desktop_user_and_leaves_nothing_running(episode, tmp_path):
    """A verifier may run the desktop user's own login shell (as_user); what that shell starts
    (the user's files are the agent's) is killed with its cgroup when the call returns."""
    from runner.tasks.scripts import run_privileged
    from runner.tasks.model import load_task

    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "task.yaml").write_text("id: probe\ninstruction: x\nprofile: linux\n")
    (folder / "oracle.sh").write_text("true\n")
    (folder / "verify.sh").write_text(
        "who=$(as_user sh -c 'id -un; setsid sleep 600 >/dev/null 2>&1 < /dev/null &')\n"
        "echo \"as_user=$who home=$USER_HOME user=$DESKTOP_USER\"\n"
        "pgrep -u \"$DESKTOP_USER\" -x sleep >/dev/null && echo 'FAIL the daemon survived' || echo PASS\n")
    result = run_privileged(episode.admin_shell, load_task(folder), "verify", episode.desktop_user, "verify")
    assert result.stdout.splitlines() == ["as_user=cu home=/home/cu user=cu", "PASS"], result


def test_as_user_ends_at_its_time_limit_with_nothing_left(episode, tmp_path):
    """A login shell the agent's files make hang (a slow ~/.profile) cannot hold the verifier: the
    call ends at AS_USER_TIMEOUT with 124, and what it started goes with its cgroup."""
    from runner.tasks.model import load_task
    from runner.tasks.scripts import run_privileged

    folder = tmp_path / "slow"
    folder.mkdir()
    (folder / "task.yaml").write_text("id: slow\ninstruction: x\nprofile: linux\n")
    (folder / "oracle.sh").write_text("true\n")
    (folder / "verify.sh").write_text(
        "AS_USER_TIMEOUT=3 as_user sh -c 'setsid sleep 700 >/dev/null 2>&1 < /dev/null & sleep 600'\n"
        "echo \"rc=$?\"\npgrep -u \"$DESKTOP_USER\" -x sleep >/dev/null && echo left || echo none\n")
    started = time.monotonic()
    result = run_privileged(episode.admin_shell, load_task(folder), "verify", episode.desktop_user, "verify")
    assert result.stdout.splitlines() in (["rc=124", "none"], ["rc=137", "none"]), result  # 137: it had to be killed
    assert time.monotonic() - started < 60


def test_sysrq_and_ctrl_alt_del_through_the_vnc_keyboard_do_not_end_the_guest(linux_image, settings, accel):
    """The agent's key tool reaches the guest's keyboard: Alt+SysRq+B or +O (SysRq is
    Alt+PrintScreen) would reset or power off the guest, Ctrl+Alt+Del reboot it. None may end an
    episode. A VM of its own: the keys would leave the shared one's desktop in another state."""
    from runner.runs.session import open_vm

    with open_vm(settings, linux_image.name, accel) as vm:  # warm: a restore of its own
        vm.display.key("b", modifiers=("alt", "printscreen"))
        vm.display.key("o", modifiers=("alt", "printscreen"))
        vm.display.key("delete", modifiers=("ctrl", "alt"))
        time.sleep(3)  # a reset would take the guest away within a second
        assert vm.host.is_running(vm.name)
        assert vm.admin_shell.run("sysctl -n kernel.sysrq", timeout=30).stdout.strip() == "0"
        groups = vm.shell.run("id -Gn", timeout=30).stdout.split()
        assert groups == ["cu"], groups  # no input, video or audio: the kernel's devices are not the user's


def test_the_agents_processes_are_frozen_before_verification(episode):
    """quarantine() freezes everything of the desktop user's, however it was started."""
    from runner.scoring.quarantine import quarantine

    # The tick is renamed into place: frozen mid-write, the file still holds a whole tick.
    episode.shell.run("setsid sh -c 'while true; do date +%s%N > /tmp/t.new; mv /tmp/t.new /tmp/ticker; sleep 0.1; "
                      "done' "
                      ">/dev/null 2>&1 < /dev/null &", timeout=30)
    wait_for(lambda: episode.admin_shell.run("test -s /tmp/ticker", timeout=30).ok, 60, "the ticker to tick")
    said = quarantine(episode.admin_shell, episode.desktop_user, episode.image.manifest.guest)
    assert said.startswith("froze ")
    first = episode.admin_shell.run("cat /tmp/ticker", timeout=30).stdout
    still = episode.admin_shell.run("sleep 2; cat /tmp/ticker; grep frozen /sys/fs/cgroup/user.slice/user-1000.slice/"
                                    "cgroup.events", timeout=30).stdout.splitlines()
    assert first.strip() and still == [first.strip(), "frozen 1"]
    # The rest of this module's tests act as the desktop user: thaw it again.
    episode.admin_shell.run("echo 0 > /sys/fs/cgroup/user.slice/user-1000.slice/cgroup.freeze; pkill -u cu -f ticker",
                            timeout=30)


def test_mcp_tools_drive_the_real_vm(episode, tmp_path):
    """The MCP server over this episode's VM, through the SDK's client: what the agent does lands."""
    import base64
    import io
    import json

    import anyio
    from mcp import Client
    from PIL import Image

    from runner.mcp.server import build_server
    from runner.mcp.trajectory import RecordingDisplay, RecordingShell, Trajectory

    trajectory = Trajectory(tmp_path)
    server = build_server(RecordingDisplay(episode.display, trajectory), RecordingShell(episode.shell, trajectory),
                          toolsets=("screen", "mouse", "keyboard", "files"), file_root="/home/cu",
                          guest=episode.image.manifest.guest)
    episode.shell.run("rm -f /tmp/mcp-typed; echo from-guest > /home/cu/mcp-note.txt", timeout=60)
    text = "printf '%s\\n' 'MCP: A_b>c|d~e' > /tmp/mcp-typed\n"

    async def session():
        async with Client(server) as client:
            shot = await client.call_tool("computer_use_screenshot", {})
            click = await client.call_tool("computer_use_mouse_click", {"x": 700, "y": 600})
            pointer = episode.shell.run("DISPLAY=:0 xdotool getmouselocation --shell", timeout=60).stdout
            await client.call_tool("computer_use_mouse_click", {"x": TERMINAL_POINT[0], "y": TERMINAL_POINT[1]})
            await anyio.to_thread.run_sync(wait_focused, episode, "XTerm")
            typed = await client.call_tool("computer_use_keyboard_type", {"text": text})
            bad = await client.call_tool("computer_use_mouse_click", {"x": 1280, "y": 10})
            note = await client.call_tool("file_download", {"path": "mcp-note.txt"})
            return shot, click, pointer, typed, bad, note

    shot, click, pointer, typed, bad, note = anyio.run(session)
    image = Image.open(io.BytesIO(base64.b64decode(shot.content[0].data)))
    assert image.format == "PNG" and image.size == (1280, 800)
    assert not click.is_error and "X=700" in pointer and "Y=600" in pointer
    assert not typed.is_error
    assert guest_file(episode, "/tmp/mcp-typed") == "MCP: A_b>c|d~e\n"
    assert bad.is_error and "outside" in bad.content[0].text
    assert note.content[0].text == "from-guest\n"
    lines = [json.loads(l) for l in (tmp_path / "trajectory.jsonl").read_text().splitlines()]
    # The click off the screen was refused before it was recorded: no action, nothing to draw.
    assert [l["tool"] for l in lines] == ["computer_use_screenshot", "computer_use_mouse_click",
                                          "computer_use_mouse_click", "computer_use_keyboard_type",
                                          "file_download"]


def test_accessibility_tools_see_what_the_screen_shows(episode, tmp_path):
    """The guest agent through MCP: the window list and the AT-SPI tree of a real mousepad, whose
    reported bounds are where a click lands (the File menu opens, and the tree then shows its items).
    Runs last in this module: it leaves mousepad's window over the terminal until it kills it."""
    import json

    import anyio
    from mcp import Client

    from runner.mcp.session import episode_server
    from runner.mcp.trajectory import Trajectory

    server = episode_server(episode, Trajectory(tmp_path), toolsets=("mouse", "accessibility"), file_root=None)
    episode.shell.run("DISPLAY=:0 setsid mousepad </dev/null >/dev/null 2>&1 &", timeout=60)

    def tree_nodes(result):
        found = []

        def walk(node):
            found.append(node)
            for child in node.get("children", []):
                walk(child)
        walk(json.loads(result.content[0].text))
        return found

    async def until(call, holds, what: str, timeout: float = 120.0):
        """Calls CALL until HOLDS(its answer): the guest shows things when it gets to them."""
        deadline = time.monotonic() + timeout
        while True:
            answer = await call()
            if holds(answer):
                return answer
            assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
            await anyio.sleep(0.5)

    async def session():
        async with Client(server) as client:
            async def list_windows():
                return json.loads((await client.call_tool("computer_use_windows", {})).content[0].text)["windows"]

            async def mousepad_tree():
                return tree_nodes(await client.call_tool("computer_use_accessibility_tree", {"app": "mousepad"}))

            windows = await until(list_windows, lambda ws: any(w["app"] == "Mousepad" and w["focused"] for w in ws),
                                  "mousepad's window")
            # The window is mapped a moment before its widgets are showing.
            before = await until(mousepad_tree, lambda nodes: any(n["role"] == "menu" and n["name"] == "File"
                                                                  for n in nodes), "mousepad's File menu")
            file_menu = next(n for n in before if n["role"] == "menu" and n["name"] == "File")
            x, y, w, h = file_menu["bounds"]
            await client.call_tool("computer_use_mouse_click", {"x": x + w // 2, "y": y + h // 2})
            after = await until(mousepad_tree, lambda nodes: any(n["role"] == "menu item" for n in nodes),
                                "the File menu's items")
            shallow = json.loads((await client.call_tool("computer_use_accessibility_tree",
                                                         {"max_depth": 2})).content[0].text)
            return windows, before, after, shallow

    try:
        windows, before, after, shallow = anyio.run(session)
    finally:
        episode.shell.run("pkill -x mousepad", timeout=60)
        wait_for(lambda: episode.shell.run("pgrep -x mousepad", timeout=60).exit_code != 0, 60, "mousepad to exit")
    by_app = {w["app"]: w for w in windows}
    assert set(by_app) == {"XTerm", "Mousepad"}
    assert by_app["Mousepad"]["focused"] and not by_app["XTerm"]["focused"]
    assert by_app["Mousepad"]["geometry"]["width"] > 300
    assert not any(n["role"] == "menu item" for n in before), "closed menus' items must be left out"
    assert any(n["role"] == "text" and "editable" in n.get("states", []) for n in before)
    opened = {n["name"].strip() for n in after if n["role"] == "menu item"}
    assert {"Save", "Quit"} <= opened, opened
    assert shallow["children"][0]["role"] == "application"
    assert all("children_omitted" in frame or "children" not in frame
               for app in shallow["children"] for frame in app.get("children", []))
