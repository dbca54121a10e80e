import os
import subprocess

import pytest

from runner.errors import UsageError
from runner.choices import AccelChoice, chosen
from runner.hypervisor.accel import AccelProbe, choose_accel
from runner.owner import Owner, me, process_start


def test_me_is_alive_and_a_finished_process_is_not():
    assert me().alive()
    child = subprocess.Popen(["true"])
    start = process_start(child.pid)
    child.wait()
    assert start is not None
    assert not Owner(child.pid, start).alive()


def test_a_reused_pid_with_another_start_time_is_not_the_owner():
    assert not Owner(os.getpid(), me().start + 1).alive()


USABLE = AccelProbe(True, "booted")
UNUSABLE = AccelProbe(False, "hangs")


@pytest.mark.parametrize("requested,probe,chosen", [
    ("auto", USABLE, "kvm"), ("auto", UNUSABLE, "tcg"), ("tcg", USABLE, "tcg"), ("kvm", USABLE, "kvm"),
])
def test_choose_accel(requested, probe, chosen):
    assert choose_accel(AccelChoice(requested), probe) == chosen


def test_forcing_kvm_tries_it_whatever_the_probe_said():
    """Only a /dev/kvm this user cannot open refuses --accel kvm (tests/unit/test_accel_probe.py)."""
    assert choose_accel(AccelChoice.kvm, UNUSABLE) == "kvm"
    with pytest.raises(UsageError, match="/dev/kvm does not exist"):
        choose_accel(AccelChoice.kvm, AccelProbe(False, "/dev/kvm does not exist", device_ok=False))
    with pytest.raises(UsageError, match="--accel must be one of auto, kvm, tcg, not 'hvf'"):
        chosen(AccelChoice, "hvf", "--accel")
