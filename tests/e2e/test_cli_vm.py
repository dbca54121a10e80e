"""`cu-run vm up`, gc, doctor and the image commands, as a user runs them: real processes, real VMs."""

import json
import os
import re
import select
import signal
import subprocess
import sys

from vmtools import cu_run, qemu_pid, wait_for
from runner.guest.ssh import SshShell


def vm_up(*extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "runner", "vm", "up", "--json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def read_endpoints(proc: subprocess.Popen, timeout: float = 300) -> dict:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        proc.kill()
        raise AssertionError(f"vm up printed nothing in {timeout:.0f} s; stderr: {proc.stderr.read()}")
    line = proc.stdout.readline()
    assert line, f"vm up exited {proc.wait()} without endpoints: {proc.stderr.read()}"
    return json.loads(line)


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err


def test_vm_up_prints_endpoints_and_sigterm_removes_everything(host, linux_image, settings):
    proc = vm_up()
    endpoints = read_endpoints(proc)
    try:
        assert set(endpoints) >= {"vnc", "ssh", "domain"}
        vnc_host, vnc_port = endpoints["vnc"].rsplit(":", 1)
        assert vnc_host == "127.0.0.1" and int(vnc_port) >= 5900
        ssh = endpoints["ssh"]
        assert ssh["host"] == "127.0.0.1" and ssh["user"] == "cu"
        shell = SshShell(ssh["host"], ssh["port"], ssh["user"], ssh["key"], linux_image.manifest.ssh.host_key)
        assert shell.run("hostname", timeout=60).stdout.strip() == "cu-guest"
        shell.close()
        assert host.is_running(endpoints["domain"])
    finally:
        proc.send_signal(signal.SIGTERM)
    code, err = finish(proc)
    assert code != 0 and "Traceback" not in err
    assert host.lookup(endpoints["domain"]) is None
    assert not (settings.episodes_dir / endpoints["domain"]).exists()


def test_killed_qemu_is_an_infrastructure_error_and_is_cleaned_up(host, linux_image, settings):
    proc = vm_up()
    endpoints = read_endpoints(proc)
    domain = endpoints["domain"]
    os.kill(qemu_pid(domain), signal.SIGKILL)
    code, err = finish(proc)
    assert code == 3, err
    assert "infrastructure error" in err and "not running" in err
    assert host.lookup(domain) is None
    assert not (settings.episodes_dir / domain).exists()


def test_gc_removes_what_a_killed_runner_left(host, linux_image, settings):
    proc = vm_up()
    # Kill the runner as soon as its domain exists: nothing gets to tear down.
    domain = wait_for(lambda: next((d.name for d in host.cu_domains()
                                    if d.tag and d.tag.owner_pid == proc.pid), None), 120, "the runner's domain")
    workdir = settings.episodes_dir / domain
    wait_for(lambda: (workdir / "overlay.qcow2").exists(), 30, "the overlay")
    proc.kill()
    proc.wait()
    assert host.is_running(domain) and workdir.exists()

    result = cu_run("gc")

    assert result.returncode == 0, result.stderr
    assert f"removed domain {domain}" in result.stdout
    assert f"removed episode folder {workdir}" in " ".join(result.stdout.split())
    assert host.lookup(domain) is None and not workdir.exists()
    assert "nothing to remove" in cu_run("gc").stdout


def test_doctor_passes_and_names_the_accelerator(linux_image):
    result = cu_run("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    out = " ".join(result.stdout.split())
    assert "accelerator" in out
    probe = json.loads((linux_image.folder.parent.parent / "accel-probe.json").read_text())["probe"]
    if probe["kvm_usable"]:
        assert "KVM usable" in out
    else:
        assert "KVM unusable, TCG will be used" in out
    assert re.search(r"capacity linux-test .* memory holds \d+ VMs \(\d+ MiB each .*\); \d+ cores run \d+ at full speed",
                     out), out


def test_doctor_fails_with_a_fix_when_libvirt_is_unreachable(tmp_path):
    result = cu_run("doctor", "--libvirt-uri", f"qemu+unix:///system?socket={tmp_path}/no-such-sock")
    assert result.returncode == 1
    out = " ".join(result.stdout.split())
    assert "cannot connect to libvirt" in out and "setup-host.sh" in out


def test_unreachable_libvirt_is_one_clear_message():
    result = cu_run("gc", "--libvirt-uri", "qemu+unix:///system?socket=/nonexistent/sock")
    assert result.returncode == 3
    assert "cannot connect to libvirt" in result.stderr and "Traceback" not in result.stderr


def test_unknown_image_is_one_clear_message():
    result = cu_run("vm", "up", "--image", "no-such-image")
    assert result.returncode == 1
    assert "no image named 'no-such-image'" in result.stderr
    # Not a build command that cannot work: the images cu-run builds.
    said = " ".join(result.stderr.split())
    assert "cu-run image build no-such-image" not in said and "linux-test, linux-desktop, windows-11" in said
    assert "Traceback" not in result.stderr


def test_second_image_build_reuses_the_cache(linux_image):
    result = cu_run("image", "build", "linux-test")
    assert result.returncode == 0, result.stderr
    assert "already built" in result.stdout
    assert linux_image.manifest.disk_sha256[:16] in result.stdout


def test_image_list_json_shows_the_manifest(linux_image):
    result = cu_run("image", "list", "--json")
    images = {i["name"]: i for i in json.loads(result.stdout)}
    entry = images["linux-test"]
    assert entry["profile"] == "linux"
    assert entry["disk_sha256"] == linux_image.manifest.disk_sha256
    assert entry["screen"] == {"width": 1280, "height": 800}
    assert entry["ssh"]["host_key"].startswith("ssh-ed25519 ")
    assert entry["packages"] > 100


def test_dry_run_prints_the_domain_xml_without_starting_anything(host, built_image):
    before = {d.name for d in host.cu_domains()}
    result = cu_run("vm", "up", "--dry-run", "--accel", "tcg")
    assert result.returncode == 0, result.stderr
    assert "<domain" in result.stdout and "restrict=on" in result.stdout
    assert {d.name for d in host.cu_domains()} == before
