"""The tests keep to a cache of their own, and build nothing for tests that boot no VM."""

import os
import subprocess
import sys

from runner.config import PROJECT_ROOT


def test_e2e_tests_that_boot_no_vm_build_nothing_in_their_own_cache(tmp_path):
    home = tmp_path / "test-cache"
    env = {**os.environ, "CU_RUN_TEST_HOME": str(home), "CU_RUN_HOME": str(tmp_path / "not-this-one")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/e2e/test_harness.py::test_lint_cli_on_windows_core_and_a_planted_error"],
                            cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:]
    assert not (home / "images").exists()  # no image built, no slot warmed
    assert not (tmp_path / "not-this-one").exists()  # and the user's cache (CU_RUN_HOME) untouched


def test_the_tests_cache_is_not_the_users():
    assert os.environ["CU_RUN_HOME"] != os.path.expanduser("~/.cache/cu-run")


def test_every_test_module_has_a_name_of_its_own():
    # tests/unit and tests/e2e are not packages: two modules of one name cannot both be collected.
    from collections import Counter
    from pathlib import Path

    names = Counter(p.name for p in (Path(__file__).resolve().parents[1]).rglob("test_*.py"))
    assert [n for n, count in names.items() if count > 1] == []
