"""LibvirtHost.agent_command: how the host's answers map to errors. The guest agent is reached
through libvirtd, so libvirtd's own trouble must be the host's fault (an infrastructure retry),
never the guest's, which after the agent acted would be scored against it. On libvirt's
test:///default driver, with libvirt's failures raised where they would come from."""

from __future__ import annotations

import json

import libvirt
import pytest

from runner.errors import GuestUnreachable, HostFault, InfraError
from runner.guest.qga import AgentCommandFailed
from runner.hypervisor import libvirt_host
from runner.hypervisor.libvirt_host import LibvirtHost
from typing_extensions import override


def libvirt_error(code: int, domain: int, message: str) -> libvirt.libvirtError:
    error = libvirt.libvirtError(message)
    error.err = (code, domain, message, libvirt.VIR_ERR_ERROR, "", "", "", 0, 0)
    return error


class DownFor(LibvirtHost):
    """A LibvirtHost whose libvirtd is down (cannot connect) for its first DOWN connections."""

    def __init__(self, down: int) -> None:
        super().__init__("test:///default")
        self.down = down

    @property
    @override
    def conn(self):
        if self.down > 0:
            self.down -= 1
            raise InfraError("cannot connect to libvirt at qemu:///system: Failed to connect socket")
        return self._conn


@pytest.fixture
def answers(monkeypatch):
    """What the agent (through libvirt) answers: a reply string, or an exception to raise."""
    sent: list[dict] = []
    replies: list[object] = []

    def command(dom, text, timeout, flags):
        sent.append(json.loads(text))
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    monkeypatch.setattr(libvirt_host.libvirt_qemu, "qemuAgentCommand", command)
    monkeypatch.setattr(libvirt_host, "LIBVIRTD_RETURN_WAIT", 3.0)
    return sent, replies


def test_an_answer_is_its_return_value(answers):
    sent, replies = answers
    replies.append(json.dumps({"return": {"pid": 42}}))
    assert LibvirtHost("test:///default").agent_command("test", {"execute": "guest-exec"}, 5) == {"pid": 42}
    assert sent == [{"execute": "guest-exec"}]


def test_a_restarting_libvirtd_is_waited_for_and_the_command_sent_once(answers):
    sent, replies = answers
    replies.append(json.dumps({"return": {}}))
    assert DownFor(down=2).agent_command("test", {"execute": "guest-ping"}, 5) == {}
    assert len(sent) == 1


def test_a_libvirtd_that_stays_away_is_a_host_fault(answers):
    with pytest.raises(HostFault, match="libvirt is gone"):
        DownFor(down=10**6).agent_command("test", {"execute": "guest-ping"}, 5)


def test_a_connection_lost_mid_command_is_a_host_fault_and_not_sent_again(answers):
    sent, replies = answers
    replies.append(libvirt_error(libvirt.VIR_ERR_SYSTEM_ERROR, libvirt.VIR_FROM_RPC, "End of file while reading data"))
    with pytest.raises(HostFault, match="connection broke during a command"):
        LibvirtHost("test:///default").agent_command("test", {"execute": "guest-exec"}, 5)
    assert len(sent) == 1  # a guest-exec may have started its script: never twice


def test_an_agent_that_does_not_answer_is_the_guest_unreachable(answers):
    _, replies = answers
    replies.append(libvirt_error(libvirt.VIR_ERR_AGENT_UNRESPONSIVE, libvirt.VIR_FROM_QEMU,
                                 "Guest agent is not responding: QEMU guest agent is not connected"))
    with pytest.raises(GuestUnreachable) as caught:
        LibvirtHost("test:///default").agent_command("test", {"execute": "guest-ping"}, 5)
    assert not isinstance(caught.value, HostFault)


def test_an_error_the_agent_answers_is_the_commands_failure(answers):
    _, replies = answers
    replies.append(libvirt_error(libvirt.VIR_ERR_INTERNAL_ERROR, libvirt.VIR_FROM_QEMU,
                                 "unable to execute QEMU agent command 'guest-file-open': No such file"))
    with pytest.raises(AgentCommandFailed, match="No such file"):
        LibvirtHost("test:///default").agent_command("test", {"execute": "guest-file-open"}, 5)


def test_a_domain_that_is_gone_is_the_guest_unreachable():
    with pytest.raises(GuestUnreachable, match="no-such-domain"):
        LibvirtHost("test:///default").agent_command("no-such-domain", {"execute": "guest-ping"}, 5)
