import pytest

from runner.config import Settings


@pytest.fixture(scope="session")
def settings() -> Settings:
    """The real cache (CU_RUN_HOME or ~/.cache/cu-run): images are built once and reused."""
    return Settings.resolve()


def pytest_collection_modifyitems(items):
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
