import os
import signal
from pathlib import Path

import pytest

from image_prefetch import PREFETCH, ImagePrefetch
from runner.config import Settings

# Tests keep their images, warm states and episodes in a cache of their own, never the
# user's (~/.cache/cu-run): CU_RUN_TEST_HOME, or ~/.cache/cu-run-tests. Set before any test
# runs, so every `cu-run` the tests start inherits it too.
TEST_HOME = Path(os.environ.get("CU_RUN_TEST_HOME") or Path.home() / ".cache" / "cu-run-tests").expanduser()
os.environ["CU_RUN_HOME"] = str(TEST_HOME)

# A session started in the background by a script (`cmd &` in a non-interactive shell) inherits
# SIGINT ignored, and so would every process it starts: a shell can then not trap SIGINT, and a
# cu-run cannot be interrupted by the tests that interrupt one. Found as a flake of the image
# prefetch's stop test (the stand-in build ignored the SIGINT and was killed 30 s later). The
# tests run as they would from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def settings() -> Settings:
    """The tests' own cache: images are built once there and reused."""
    return Settings.resolve(TEST_HOME)


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="also run the full tier: the tests marked full, which the default tier leaves out for "
                          "time (docs/testing.md)")


def pytest_collection_modifyitems(config, items):
    """The tiers and the order: unit tests first, then the tests that boot VMs; the full tier's
    tests only with --full."""
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
    if not config.getoption("--full"):
        left_out = [item for item in items if "full" in item.keywords]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if "full" not in item.keywords]
            config._cu_run_left_out = len(left_out)
    # Stable: within each group the collection order stays.
    items.sort(key=lambda item: "e2e" in item.keywords)


# The images each fixture stands for, in the order the e2e tests first need them.
_IMAGE_FIXTURES = (("built_image", "linux-test"), ("desktop_image", "linux-desktop"))


def pytest_collection_finish(session) -> None:
    """Builds the images the selected e2e tests ask for while the unit tests run
    (tests/image_prefetch.py). Here, not in collection_modifyitems: -m and -k have deselected by now."""
    if session.config.option.collectonly:
        return
    names = [name for fixture, name in _IMAGE_FIXTURES
             if any(fixture in item.fixturenames for item in session.items)]
    if names:
        prefetch = session.config.stash[PREFETCH] = ImagePrefetch(names, TEST_HOME / "logs")
        prefetch.start()


def pytest_sessionfinish(session):
    if PREFETCH in session.config.stash:
        session.config.stash[PREFETCH].stop()


def pytest_report_header(config):
    return "tier: full (every test)" if config.getoption("--full") else \
        "tier: default (the full tier's tests are left out; add --full for them)"


def pytest_terminal_summary(terminalreporter, config):
    left_out = getattr(config, "_cu_run_left_out", 0)
    if left_out:
        terminalreporter.write_line(f"{left_out} tests of the full tier were left out: run them with --full")
    if PREFETCH in config.stash and (line := config.stash[PREFETCH].summary()):
        terminalreporter.write_line(line)


# Fast feedback: a unit test that fails stops the run before the first VM boots.
_UNIT_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and "e2e" not in item.keywords:
        item.config.stash[_UNIT_FAILED] = True
    return report


def pytest_runtest_setup(item):
    if "e2e" in item.keywords and item.config.stash.get(_UNIT_FAILED, False):
        pytest.exit("a unit test failed, so no VM is booted: fix it first (or run the e2e tests alone: -m e2e)",
                    returncode=1)
