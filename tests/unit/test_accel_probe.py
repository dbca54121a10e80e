"""The KVM probe boots cu-run's own sector, not a kernel (issue 51): it answers on an Ubuntu host
whose /boot/vmlinuz-* is 0600 root, it caches only answers about KVM itself, and `--accel kvm`
tries KVM whatever the probe said, refusing only where there is no /dev/kvm to open.

Real QEMU where the sector itself is on trial (under TCG, and as a kvm-group user on this host);
a fake boot at the narrowest seam (accel.boot_probe) where only the decisions are."""

from __future__ import annotations

import ctypes
import grp
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from runner.choices import AccelChoice
from runner.config import Settings
from runner.errors import UsageError
from runner.hypervisor import accel, probe_image
from runner.hypervisor.accel import AccelProbe, Boot, cached_probe, choose_accel, forced_kvm_warning, probe_kvm
from runner.runs.scope import resolve_accel

needs_qemu = pytest.mark.skipif(shutil.which(accel.QEMU) is None, reason=f"{accel.QEMU} is not installed")
# This host's /dev/kvm is PVM: a guest's ring-0 code is emulated, so a kernel (and the sector's
# count) crawls for minutes. Where it is loaded, the probe's right answer is "no KVM: it hangs".
PVM_HOST = Path("/sys/module/kvm_pvm").exists()


def test_the_sector_is_one_bios_boot_sector_with_the_banner():
    sector = probe_image.boot_sector()
    assert len(sector) == 512 and sector.endswith(b"\x55\xaa")
    assert probe_image.BANNER in sector


@needs_qemu
def test_the_sector_runs_every_step_under_tcg():
    """The positive control: the sector is right, so a sector that runs nowhere cannot pass for
    "KVM hangs" (probe_kvm checks the same under TCG before it blames KVM)."""
    boot = accel.boot_probe("tcg", 20.0, probe_image.boot_sector())
    assert boot.banner, boot
    assert boot.steps == "".join(probe_image.STEPS) and boot.qemu_error is None
    assert boot.seconds < 10


@needs_qemu
def test_a_sector_that_runs_nowhere_is_not_blamed_on_kvm_nor_cached(tmp_path, monkeypatch, fake_device):
    monkeypatch.setattr(accel, "PROBE_SECONDS", 1.0)
    monkeypatch.setattr(accel, "CONTROL_SECONDS", 1.5)
    monkeypatch.setattr(accel, "probe_kvm", lambda: probe_kvm(image=bytes(512)))  # no boot signature
    probe = cached_probe(tmp_path)
    assert not probe.kvm_usable and not probe.about_kvm
    assert "did not run under TCG either" in probe.reason
    assert not (tmp_path / accel.CACHE_FILE).exists()


# -- the decisions, on fake boots


@pytest.fixture
def fake_device(tmp_path, monkeypatch) -> Path:
    """A /dev/kvm this user may open, whatever the host has."""
    device = tmp_path / "kvm"
    device.touch(mode=0o660)
    monkeypatch.setattr(accel, "KVM_DEVICE", device)
    return device


def fake_boots(monkeypatch, kvm: Boot, tcg: Boot) -> list[str]:
    """accel.boot_probe answers KVM and TCG; the list records each boot."""
    booted: list[str] = []

    def boot(how, _timeout, _image):
        booted.append(how)
        return kvm if how == "kvm" else tcg

    monkeypatch.setattr(accel, "boot_probe", boot)
    return booted


RAN = Boot(True, 0.3, "LIM", None)
CRAWLED = Boot(False, 8.0, "LIM", None)
RESET = Boot(False, 0.5, "", "the guest reset")
NOTHING = Boot(False, 30.0, "", None)


@pytest.mark.parametrize("kvm,tcg,usable,words", [
    (RAN, NOTHING, True, "ran under KVM"),
    (CRAWLED, RAN, False, "nested KVM hangs or crawls here"),
    (RESET, RAN, False, "QEMU stopped (the guest reset)"),
])
def test_an_answer_about_kvm_is_cached(tmp_path, monkeypatch, fake_device, kvm, tcg, usable, words):
    booted = fake_boots(monkeypatch, kvm, tcg)
    probe = cached_probe(tmp_path)
    assert probe.kvm_usable is usable and probe.about_kvm and words in probe.reason
    assert cached_probe(tmp_path) == probe
    assert booted == (["kvm"] if usable else ["kvm", "tcg"])  # the second answer came from the cache


@pytest.mark.parametrize("kvm,tcg", [(CRAWLED, NOTHING), (RESET, RESET)])
def test_an_answer_not_about_kvm_is_not_cached(tmp_path, monkeypatch, fake_device, kvm, tcg):
    booted = fake_boots(monkeypatch, kvm, tcg)
    assert not cached_probe(tmp_path).about_kvm
    cached_probe(tmp_path)
    assert booted == ["kvm", "tcg"] * 2
    assert not (tmp_path / accel.CACHE_FILE).exists()


def test_without_qemu_nothing_is_booted_nor_cached(tmp_path, monkeypatch, fake_device):
    booted = fake_boots(monkeypatch, RAN, RAN)
    monkeypatch.setattr(accel, "QEMU", "qemu-system-none-such")
    probe = cached_probe(tmp_path)
    assert not probe.kvm_usable and "not installed" in probe.reason and booted == []
    assert not (tmp_path / accel.CACHE_FILE).exists()
    assert choose_accel(AccelChoice.kvm, probe) == "kvm"  # QEMU's own error will say more than a guess


def test_an_answer_saved_by_the_kernel_probe_is_probed_again(tmp_path, monkeypatch, fake_device):
    """The old probe cached "QEMU could not start under KVM" (an unreadable kernel) until reboot."""
    (tmp_path / accel.CACHE_FILE).write_text(json.dumps({
        "key": {"boot_id": "x", "kernel": "/boot/vmlinuz-6.8.0-31-generic", "kernel_mtime": 1.0},
        "probe": {"kvm_usable": False, "reason": "QEMU could not start under KVM: could not load kernel"}}))
    booted = fake_boots(monkeypatch, RAN, RAN)
    assert cached_probe(tmp_path).kvm_usable and booted == ["kvm"]


# -- --accel kvm


def test_forced_kvm_is_tried_whatever_the_probe_said_with_a_warning():
    failed = AccelProbe(False, "under KVM the probe guest did not finish", about_kvm=True)
    assert choose_accel(AccelChoice.kvm, failed) == "kvm"
    assert "did not finish" in (forced_kvm_warning(AccelChoice.kvm, failed) or "")
    assert choose_accel(AccelChoice.auto, failed) == "tcg"
    assert forced_kvm_warning(AccelChoice.auto, failed) is None
    assert forced_kvm_warning(AccelChoice.kvm, AccelProbe(True, "ran", about_kvm=True)) is None


def test_forced_kvm_without_a_dev_kvm_is_refused_and_nothing_is_cached(tmp_path, monkeypatch, fake_device):
    fake_boots(monkeypatch, RAN, RAN)
    assert cached_probe(tmp_path).kvm_usable
    saved = (tmp_path / accel.CACHE_FILE).read_text()
    monkeypatch.setattr(accel, "KVM_DEVICE", tmp_path / "no-kvm")
    probe = cached_probe(tmp_path)
    assert not probe.device_ok and not probe.about_kvm  # the saved "works" is not served without /dev/kvm
    with pytest.raises(UsageError, match="--accel kvm asked for, but .*no-kvm does not exist"):
        choose_accel(AccelChoice.kvm, probe)
    assert choose_accel(AccelChoice.auto, probe) == "tcg"
    assert (tmp_path / accel.CACHE_FILE).read_text() == saved


# -- an Ubuntu host, stood in for: a kvm-group user, /boot/vmlinuz-* 0600 root, no image built


UBUNTU_KERNEL = "vmlinuz-6.8.0-31-generic"
PROBE_USER = "cu-probe-test"


@pytest.fixture(scope="module")
def probe_user() -> Iterator[pwd.struct_passwd]:
    """A user who is not root, made for these tests and removed after them."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("making a user needs root and useradd")
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PROBE_USER],
                          capture_output=True).returncode == 0  # else it is there already: reused, and kept
    yield pwd.getpwnam(PROBE_USER)
    if made:
        subprocess.run(["userdel", PROBE_USER], check=False)


@pytest.fixture
def ubuntu_boot() -> Iterator[Path]:
    """A stand-in /boot as Ubuntu makes it (Launchpad bug 759725): the kernel 0600, owned by root."""
    boot = Path(tempfile.mkdtemp(prefix="cu-ubuntu-boot-"))
    boot.chmod(0o755)
    kernel = boot / UBUNTU_KERNEL
    kernel.write_bytes(b"MZ stand-in kernel")
    kernel.chmod(0o600)
    yield boot
    shutil.rmtree(boot)


@pytest.fixture
def user_cache(probe_user) -> Iterator[Path]:
    """The user's cu-run cache, empty: no linux-test image is built."""
    cache = Path(tempfile.mkdtemp(prefix="cu-probe-cache-"))
    os.chown(cache, probe_user.pw_uid, probe_user.pw_gid)
    yield cache
    shutil.rmtree(cache)


def as_user(user: pwd.struct_passwd, groups: list[int], boot: Path, work: Callable[[], dict]) -> dict:
    """WORK's answer, worked out in a child that sees BOOT as /boot (its own mount namespace, so the
    host's /boot is untouched) and runs as USER in GROUPS. The venv's Python lives under /root,
    which USER may not enter, so the child is a fork of this process, not a new interpreter."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: it never returns into pytest
        try:
            os.close(read)
            answer = _in_child(user, groups, boot, work)
            with os.fdopen(write, "w") as out:
                out.write(json.dumps(answer))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer_in:
        answer = answer_in.read()
    os.waitpid(pid, 0)
    result = json.loads(answer)
    if "skip" in result:
        pytest.skip(result["skip"])
    assert "error" not in result, result
    return result


def _in_child(user: pwd.struct_passwd, groups: list[int], boot: Path, work: Callable[[], dict]) -> dict:
    try:
        cannot = _bind_over_boot(boot)
        if cannot:
            return {"skip": cannot}
        os.setgroups(groups)
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
        tempfile.tempdir = "/tmp"  # the probe's scratch, not in a folder of root's
        return work()
    except BaseException as exc:  # noqa: BLE001 - carried to the parent, which fails the test
        return {"error": repr(exc)}


def _bind_over_boot(boot: Path) -> str | None:
    """BOOT over /boot in a mount namespace of this process's own, or why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newns, ms_bind, ms_rec, ms_private = 0x20000, 0x1000, 0x4000, 0x40000
    if libc.unshare(clone_newns) != 0:
        return f"no mount namespace here: {os.strerror(ctypes.get_errno())}"
    if libc.mount(b"none", b"/", None, ms_rec | ms_private, None) != 0:  # so nothing leaks to the host
        return f"cannot make / private: {os.strerror(ctypes.get_errno())}"
    if libc.mount(str(boot).encode(), b"/boot", None, ms_bind, None) != 0:
        return f"cannot bind the stand-in over /boot: {os.strerror(ctypes.get_errno())}"
    return None


def resolve_as_a_user(cache: Path) -> dict:
    """What resolve_accel answers this user, with what it cached, and what --accel kvm gets."""
    kernel = Path("/boot") / UBUNTU_KERNEL
    stand_in = {"kernel_listed": kernel.exists(), "kernel_readable": os.access(kernel, os.R_OK), "uid": os.getuid()}
    settings = Settings(cache_dir=cache, libvirt_uri="test:///default")
    chosen, probe = resolve_accel(settings, AccelChoice.auto)
    try:
        forced: str = choose_accel(AccelChoice.kvm, probe)
    except UsageError as exc:
        forced = f"refused: {exc}"
    saved = cache / accel.CACHE_FILE
    return {**stand_in, "chosen": chosen, "probe": asdict(probe), "forced": forced,
            "warning": forced_kvm_warning(AccelChoice.kvm, probe),
            "cached": json.loads(saved.read_text())["probe"] if saved.exists() else None}


@needs_qemu
@pytest.mark.skipif(not Path("/dev/kvm").exists(), reason="no /dev/kvm here")
def test_on_an_ubuntu_host_the_probe_answers_about_kvm_not_about_a_file(probe_user, ubuntu_boot, user_cache):
    kvm_group = grp.getgrnam("kvm").gr_gid
    got = as_user(probe_user, [kvm_group], ubuntu_boot, lambda: resolve_as_a_user(user_cache))
    assert got["uid"] != 0 and got["kernel_listed"] and not got["kernel_readable"]  # the stand-in holds
    probe = got["probe"]
    assert probe["about_kvm"] and probe["device_ok"], probe
    for about_a_file in ("vmlinuz", "kernel", "Permission denied", "could not start", "No such file"):
        assert about_a_file not in probe["reason"], probe
    assert got["cached"] == probe  # an answer about KVM, so cached; nothing else was
    assert got["forced"] == "kvm"
    if PVM_HOST:
        assert got["chosen"] == "tcg" and not probe["kvm_usable"]
        assert "nested KVM hangs or crawls here" in probe["reason"], probe
        assert "did not finish" in got["warning"]


def test_a_user_outside_the_kvm_group_is_refused_kvm_and_nothing_is_cached(probe_user, ubuntu_boot, user_cache):
    if not Path("/dev/kvm").exists():
        pytest.skip("no /dev/kvm here")
    got = as_user(probe_user, [], ubuntu_boot, lambda: resolve_as_a_user(user_cache))
    assert got["chosen"] == "tcg" and not got["probe"]["device_ok"]
    assert got["forced"].startswith("refused: --accel kvm asked for, but /dev/kvm is not readable and writable")
    assert got["cached"] is None
