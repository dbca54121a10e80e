"""The addresses `mcp --attach` takes, and what it refuses before it connects anywhere."""

import pytest

from runner.errors import UsageError
from runner.mcp.attach import SshTarget, attached_server, parse_ssh, parse_vnc, read_password
from runner.mcp.trajectory import Trajectory


def test_vnc_and_ssh_addresses():
    assert parse_vnc("vnc://127.0.0.1:5901") == ("127.0.0.1", 5901)
    assert parse_vnc("vnc://lab-3") == ("lab-3", 5900)
    assert parse_vnc("10.0.0.5:5902") == ("10.0.0.5", 5902)
    for bad in ("http://x:1", "vnc://", "vnc://h:port"):
        with pytest.raises(UsageError):
            parse_vnc(bad)
    assert parse_ssh("cu@127.0.0.1:2222") == SshTarget("cu", "127.0.0.1", 2222)
    assert parse_ssh("admin@lab-3") == SshTarget("admin", "lab-3", 22)
    with pytest.raises(UsageError, match="USER@HOST:PORT"):
        parse_ssh("127.0.0.1:22")


def test_the_password_comes_from_a_file(tmp_path):
    (tmp_path / "pw").write_text("s3cret\n")
    assert read_password(tmp_path / "pw") == "s3cret" and read_password(None) is None
    with pytest.raises(UsageError, match="cannot read"):
        read_password(tmp_path / "missing")


def test_tools_that_need_a_guest_shell_are_refused_without_one_before_connecting():
    # Port 1 answers nothing: a refusal that came after connecting would be an infra error instead.
    with pytest.raises(UsageError, match="guest's shell"):
        attached_server("vnc://127.0.0.1:1", Trajectory(None), toolsets=("screen", "files"), password=None)
    with pytest.raises(UsageError, match="--guest-agent"):
        attached_server("vnc://127.0.0.1:1", Trajectory(None), toolsets=("accessibility",), password=None,
                        ssh=SshTarget("cu", "127.0.0.1", 22))
    with pytest.raises(UsageError, match="--host-key"):
        attached_server("vnc://127.0.0.1:1", Trajectory(None), toolsets=("screen",), password=None,
                        ssh=SshTarget("cu", "127.0.0.1", 22))
