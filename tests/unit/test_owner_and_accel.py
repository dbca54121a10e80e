import os
import subprocess

import pytest

from runner.errors import UsageError
from runner.choices import AccelChoice, chosen
from runner.hypervisor.accel import AccelProbe, choose_accel, probe_kvm
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


def test_forcing_kvm_where_it_does_not_work_says_why():
    with pytest.raises(UsageError, match="hangs"):
        choose_accel(AccelChoice.kvm, UNUSABLE)
    with pytest.raises(UsageError, match="--accel must be one of auto, kvm, tcg, not 'hvf'"):
        chosen(AccelChoice, "hvf", "--accel")


def test_probe_without_a_kernel_does_not_claim_kvm(tmp_path):
    assert not probe_kvm(None).kvm_usable
    assert not probe_kvm(tmp_path / "missing-vmlinuz").kvm_usable
