"""The images built beside the unit tests (tests/image_prefetch.py), with a stand-in build
command: a shell script that takes the place of `cu-run image build` (the narrowest seam). The
real builds run in every session that boots VMs, before its first e2e test."""

from __future__ import annotations

import threading
import time

from image_prefetch import ImagePrefetch


def fake_build(script: str):
    """A stand-in for `cu-run image build NAME`: SCRIPT in sh, with NAME as $1."""
    return lambda name: ["sh", "-c", script, "fake-build", name]


def test_a_fixture_waits_for_its_image_and_the_builds_go_one_after_the_other(tmp_path):
    script = f'sleep 0.3; echo "$1" >> {tmp_path}/order; echo "built $1"'
    prefetch = ImagePrefetch(["linux-test", "linux-desktop"], tmp_path / "logs", fake_build(script))
    prefetch.start()
    prefetch.wait("linux-test")
    assert (tmp_path / "order").read_text().splitlines()[0] == "linux-test"  # done when the wait returned
    prefetch.wait("linux-desktop")
    assert (tmp_path / "order").read_text().splitlines() == ["linux-test", "linux-desktop"]
    assert (tmp_path / "logs" / "prefetch-linux-desktop.log").read_text() == "built linux-desktop\n"
    prefetch.wait("an-image-nobody-builds")  # returns at once
    prefetch.stop()
    assert set(prefetch.build_s) == {"linux-test", "linux-desktop"} and prefetch.failed == {}
    assert prefetch.summary().startswith("images built beside the unit tests: linux-test ")


def test_a_failed_build_is_waited_for_and_named_not_raised(tmp_path):
    prefetch = ImagePrefetch(["linux-test"], tmp_path / "logs", fake_build('echo "no mirror" >&2; exit 3'))
    prefetch.start()
    prefetch.wait("linux-test")  # the fixture's own build then tries again and says what is wrong
    prefetch.stop()
    assert prefetch.failed == {"linux-test": tmp_path / "logs" / "prefetch-linux-test.log"}
    assert "no mirror" in prefetch.failed["linux-test"].read_text()
    assert "linux-test's build beside the unit tests failed" in prefetch.summary()


def test_stop_interrupts_the_build_going_as_ctrl_c_would_and_starts_no_other(tmp_path):
    # The build's children are interrupted with it: the whole session gets SIGINT.
    script = (f'trap "echo interrupted > {tmp_path}/$1; exit 130" INT; echo started > {tmp_path}/$1; '
              f'sleep 60 & wait')
    prefetch = ImagePrefetch(["linux-test", "linux-desktop"], tmp_path / "logs", fake_build(script))
    prefetch.start()
    deadline = time.monotonic() + 10
    while not (tmp_path / "linux-test").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    prefetch.stop()
    assert (tmp_path / "linux-test").read_text() == "interrupted\n"  # not left to run its 60 s
    assert not (tmp_path / "linux-desktop").exists()
    assert prefetch.interrupted == ["linux-test"] and prefetch.failed == {}
    assert "linux-test's build beside the unit tests was interrupted" in prefetch.summary()
    waiter = threading.Thread(target=prefetch.wait, args=("linux-desktop",))
    waiter.start()
    waiter.join(5)
    assert not waiter.is_alive()  # a fixture does not wait for a build that never starts
