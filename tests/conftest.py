import os
from pathlib import Path

import pytest

from runner.config import Settings

# Tests keep their images, warm states and episodes in a cache of their own, never the
# user's (~/.cache/cu-run): CU_RUN_TEST_HOME, or ~/.cache/cu-run-tests. Set before any test
# runs, so every `cu-run` the tests start inherits it too.
TEST_HOME = Path(os.environ.get("CU_RUN_TEST_HOME") or Path.home() / ".cache" / "cu-run-tests").expanduser()
os.environ["CU_RUN_HOME"] = str(TEST_HOME)


@pytest.fixture(scope="session")
def settings() -> Settings:
    """The tests' own cache: images are built once there and reused."""
    return Settings.resolve(TEST_HOME)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow, which CI leaves out for time (docs/testing.md)")


def pytest_collection_modifyitems(config, items):
    run_slow = config.getoption("--slow")
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: past CI's time budget; run with --slow"))
