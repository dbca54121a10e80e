"""Faults inside an episode: a VM that dies is an infrastructure error, and nothing leaks."""

import os
import signal

import pytest

from vmtools import qemu_pid, wait_for
from runner.vm.episode import EpisodeOptions, EpisodeVM
from runner.errors import InfraError


def test_vm_killed_mid_episode_raises_infra_error_and_tears_down(host, linux_image, settings, accel, tmp_path):
    killed_mid_episode(host, linux_image, settings, accel, tmp_path)


@pytest.mark.full
def test_a_linux_desktop_vm_killed_mid_episode_is_an_infra_error_too(host, desktop_image, settings, accel, tmp_path):
    killed_mid_episode(host, desktop_image, settings, accel, tmp_path)


def killed_mid_episode(host, image, settings, accel, tmp_path):
    vm = EpisodeVM(host, image, settings, run_id="fault", slot=0,
                   options=EpisodeOptions(accel=accel, wait_desktop=False), artifacts=tmp_path / "artifacts")
    with pytest.raises(InfraError):
        with vm:
            assert vm.shell.run("true", timeout=60).exit_code == 0
            os.kill(qemu_pid(vm.name), signal.SIGKILL)
            wait_for(lambda: not host.is_running(vm.name), 30, "libvirt to notice QEMU died")
            with pytest.raises(InfraError):
                vm.check_alive()
            vm.shell.run("echo still here?", timeout=60)
    assert host.lookup(vm.name) is None
    assert not vm.workdir.exists()
    # The failure kept what explains it.
    assert (tmp_path / "artifacts" / "serial.log").read_text().count("Linux version") == 1
    assert (tmp_path / "artifacts" / "domain.xml").exists()
