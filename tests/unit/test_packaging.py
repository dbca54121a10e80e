"""A non-editable install works: `pip install .` into a clean venv gives a cu-run that finds the
built-in suites, the image recipe, the Packer template and the guest agent inside the package."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from runner.config import PROJECT_ROOT


def test_a_clean_non_editable_install_finds_its_data(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # From a copy: pip builds in the source folder, and a build/ left there by an earlier install
    # keeps files the checkout has since moved or removed.
    source = tmp_path / "source"
    top_level = {".git", ".venv", "build", "runs", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
    shutil.copytree(PROJECT_ROOT, source, ignore=lambda folder, names: [
        n for n in names if n == "__pycache__" or n.endswith(".egg-info")
        or (Path(folder) == PROJECT_ROOT and n in top_level)])
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(source)],
                               capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]

    def run(*args: str) -> subprocess.CompletedProcess:
        # From a folder outside the source tree, so nothing of the checkout is on the path.
        return subprocess.run([str(venv / "bin" / "cu-run"), *args], capture_output=True, text=True, cwd=tmp_path,
                              timeout=120, env={"PATH": "/usr/bin:/bin", "COLUMNS": "1000", "HOME": str(tmp_path)})

    import runner

    version = run("--version")
    assert version.stdout.strip() == f"cu-run {runner.__version__}", version.stdout + version.stderr
    installed_version = subprocess.run([str(venv / "bin" / "python"), "-c", "import importlib.metadata as m, cu_run; "
                                        "print(m.version('cu-run'), cu_run.__version__)"],
                                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert installed_version.stdout.split() == [runner.__version__] * 2, installed_version.stderr  # one version
    listed = run("tasks", "list", "--suite", "linux-core")
    assert listed.returncode == 0 and "editor-write-save" in listed.stdout, listed.stdout + listed.stderr
    assert "site-packages" in "".join(listed.stdout.split())  # the title wraps the path at any width
    for suite in ("linux-core", "linux-safety", "windows-core"):
        linted = run("tasks", "lint", "--suite", suite)
        assert linted.returncode == 0, linted.stdout + linted.stderr
    # A new task's files are a template in the package (runner/tasks/templates/new-task).
    made = run("tasks", "new", "probe", "--suite", str(tmp_path / "suite"))
    assert made.returncode == 0, made.stdout + made.stderr
    assert sorted(p.name for p in (tmp_path / "suite" / "probe").iterdir()) == [
        "oracle.sh", "setup.sh", "task.yaml", "verify.sh"]
    assert run("tasks", "lint", "--suite", str(tmp_path / "suite")).returncode == 0
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "from runner.config import DATA_ROOT, recipe_dir; from runner.images.linux_images import GUEST_AGENT_DIR, recipe_hash;"
         "from runner.images.windows_11 import TEMPLATE_DIR;"
         "print(DATA_ROOT); print(recipe_hash(recipe_dir('linux-test')), recipe_hash(recipe_dir('linux-desktop')));"
         "print((recipe_dir('linux-test') / 'rootfs/home/cu/.xinitrc').is_file(), "
         "(GUEST_AGENT_DIR / 'cu_guest_agent.py').is_file(),"
         "(TEMPLATE_DIR / 'windows-11.pkr.hcl').is_file(), (TEMPLATE_DIR / '../../guest_agent/windows/invoke.ps1').is_file());"
         # The Windows walks are guest programs the runner reads from its package as it sends them.
         "from runner.profiles import DesktopUser, get_profile; from runner.profiles.listing import Watch;"
         "from runner.profiles.windows_listing import WindowsLister; from runner.profiles.linux import LinuxQuarantine;"
         "from runner.profiles.linux_listing import LinuxLister;"
         "w = get_profile('windows'); print('$prune.Contains' in WindowsLister().list_script(Watch(('C:/evals',))),"
         "'icacls' in w.scripts.hand_home_script(DesktopUser('cu', 'C:/Users/cu')));"
         # So are the Linux ones: the quarantine (with the X sweep's Python), the lister, the prelude.
         "l, u = get_profile('linux'), DesktopUser('cu', '/home/cu');"
         "q = LinuxQuarantine().quarantine_script(u, frozenset());"
         "print('kill_outside' in q, 'X-Resource' in q,"
         "'def wild' in LinuxLister().list_script(Watch(('/home/cu',))),"
         "'as_user()' in l.scripts.privileged_prelude('/run/t', u, 'verify'));"
         "import json; print(json.dumps(sorted(p.relative_to(DATA_ROOT).as_posix()"
         " for p in (DATA_ROOT / 'guest_agent').rglob('*') if p.is_file() and '__pycache__' not in p.parts)))"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60)
    data_root, digest, found, programs, linux_programs, shipped = where.stdout.splitlines()
    assert Path(data_root).is_relative_to(venv) and found == "True True True True", where.stdout + where.stderr
    assert programs == "True True", where.stdout + where.stderr
    assert linux_programs == "True True True True", where.stdout + where.stderr
    # Every guest program of the checkout is in the package: the runner reads them there as it sends them.
    assert json.loads(shipped) == sorted(p.relative_to(PROJECT_ROOT).as_posix() for p in (PROJECT_ROOT / "guest_agent").rglob("*")
                                         if p.is_file() and "__pycache__" not in p.parts)
    # The installed recipe is the checkout's, file for file: an image built from either is the same.
    from runner.config import recipe_dir
    from runner.images.linux_images import recipe_hash

    # linux-desktop's user files sit in hidden folders (~/.config, ~/.thunderbird), which package
    # data globs skip unless told.
    assert digest.split() == [recipe_hash(recipe_dir("linux-test")), recipe_hash(recipe_dir("linux-desktop"))]


def test_no_source_file_is_left_out_of_git(tmp_path):
    """An ignore pattern once swallowed new modules of runner/runs/ (a pattern for run folders):
    every file of the package that a checkout has must be one git tracks."""
    if not (PROJECT_ROOT / ".git").exists():
        return  # an installed copy, not a checkout: nothing to compare
    ignored = subprocess.run(["git", "ls-files", "--others", "--ignored", "--exclude-standard", "runner", "tests",
                              "tasks", "images", "guest_agent", "packer", "bench", "docs", "scripts"],
                             cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert [p for p in ignored if "__pycache__" not in p and not p.endswith(".pyc")] == []
