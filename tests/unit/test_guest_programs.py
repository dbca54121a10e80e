"""Guest programs are files, and CI reads each one with its linter (docs/architecture.md, "Guest
programs"): shellcheck for sh, ruff for Python, the PowerShell grammar for PowerShell
(test_windows_image.py: test_every_powershell_file_parses, over packer/ and guest_agent/), and the
rules of runner/tasks/guest_lint.py for what a program that runs as root must never do. The
image's build scripts (images/, run as root in a chroot before any agent exists) get shellcheck;
the root rules are about what the agent made, and at build time it has made nothing.

A guard keeps programs out of Python strings: tests/guest_program_strings.txt lists those that
are still there, and may only shrink."""

from __future__ import annotations

import ast
import fnmatch
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from runner.tasks.guest_lint import RULES, check_program, check_root_python, check_root_sh, markers, runs_as

PROJECT = Path(__file__).resolve().parents[2]
GUEST = PROJECT / "guest_agent"
SH = sorted(GUEST.rglob("*.sh"))
POWERSHELL = sorted(GUEST.rglob("*.ps1"))
# Python programs the runner sends to the guest from runner/ rather than guest_agent/
GUEST_MODULES = [PROJECT / "runner" / "network" / "guest_forwarder.py"]
PYTHON = sorted(GUEST.rglob("*.py")) + GUEST_MODULES
# Who runs a program that cannot say so itself yet: the image installs cu_guest_agent.py, and its
# bytes are in the recipe's hash (runner.images.linux_images: recipe_hash), so an edit rebuilds every
# Linux image. It runs in the desktop user's session (DISPLAY=:0, through the user's shell).
DECLARED_HERE = {"guest_agent/linux/cu_guest_agent.py": "# cu-run: runs as the desktop user\n"}
# The image build's scripts, and the executables its root file systems install
IMAGE_SH = sorted({*PROJECT.glob("images/**/*.sh"),
                   *(p for p in PROJECT.glob("images/*/rootfs/**/*")
                     if p.is_file() and p.read_bytes().startswith((b"#!/bin/sh\n", b"#!/bin/sh ")))})


# Notes the image's scripts keep until their recipe changes anyway: an edit to images/ changes the
# recipe's hash (runner.images.linux_images: recipe_hash) and rebuilds every Linux image. Both are
# shellcheck's "info": a line of dpkg-excludes.txt holds no space (SC2013), and dpkg-query's format
# is meant for dpkg-query (SC2016).
IMAGE_NOTES = {"images/common/build-debian.sh": "SC2013,SC2016"}


def _id(path: Path) -> str:
    return str(path.relative_to(PROJECT))


needs_shellcheck = pytest.mark.skipif(shutil.which("shellcheck") is None,
                                      reason="needs shellcheck (scripts/setup-host.sh --test)")


# -- each file through its linter


@needs_shellcheck
@pytest.mark.parametrize("program", SH + IMAGE_SH, ids=_id)
def test_sh_passes_shellcheck(program):
    kept = ["--exclude", IMAGE_NOTES[_id(program)]] if _id(program) in IMAGE_NOTES else []
    result = subprocess.run(["shellcheck", "-s", "sh", *kept, str(program)], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_shellcheck
def test_shellcheck_fails_a_bad_program(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text('# cu-run: runs as root\nrm -rf $1/*\n')
    assert subprocess.run(["shellcheck", "-s", "sh", str(bad)], capture_output=True, timeout=60).returncode != 0


def test_ruff_reads_every_guest_python_program():
    """.ci/run runs `ruff check .` at the root: guest_agent/ and the guest modules are in it unless
    pyproject's [tool.ruff] leaves them out."""
    ruff = tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["ruff"]
    assert "ruff check ." in (PROJECT / ".ci" / "run").read_text()
    excluded = [*ruff.get("exclude", []), *ruff.get("extend-exclude", [])]
    for program in [*GUEST.rglob("*.py"), *GUEST_MODULES]:
        relative = _id(program)
        assert not any(fnmatch.fnmatch(relative, pattern) or relative.startswith(pattern.rstrip("/*") + "/")
                       for pattern in excluded), f"{relative} is left out of ruff by {excluded}"
    assert list(GUEST.rglob("*.py")), "no Python program under guest_agent/: is the glob right?"


@pytest.mark.parametrize("program", SH + PYTHON + POWERSHELL, ids=_id)
def test_program_says_who_runs_it_and_keeps_the_root_rules(program):
    kind = {".sh": "sh", ".py": "python", ".ps1": "powershell"}[program.suffix]
    declared = DECLARED_HERE.get(_id(program), "")
    findings = check_program(declared + program.read_text(encoding="utf-8"), kind)
    shift = declared.count("\n")
    assert not findings, "\n".join(f"{_id(program)}:{f.line - shift}: {f.rule}: {f.why}\n    {f.text}" for f in findings)


def test_every_powershell_program_is_parsed_by_the_windows_image_tests():
    from test_windows_image import POWERSHELL as PARSED
    assert POWERSHELL and set(POWERSHELL) <= set(PARSED)


def test_guest_modules_import_only_the_standard_library():
    """The forwarder runs with the guest's python3 -I -S (guest_agent/linux/network-start.sh):
    no site module, so the standard library only."""
    for module in GUEST_MODULES:
        imported = set()
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
        assert imported <= sys.stdlib_module_names, f"{_id(module)} imports {sorted(imported - sys.stdlib_module_names)}"


# -- who runs it


@pytest.mark.parametrize(("text", "powershell", "who"), [
    ("# cu-run: runs as root\nset -eu\n", False, "root"),
    ("#!/bin/sh\n# cu-run: runs as the desktop user\n: \"${X?}\"\n", False, "desktop user"),
    ("# what it does\n#\n# cu-run: runs as root\n", False, "root"),
    ("set -eu\n# cu-run: runs as root\n", False, None),  # not in the leading comments
    ("# cu-run: runs as root\n# cu-run: runs as the desktop user\n", False, None),  # twice
    ("# cu-run runs as root\n", False, None),
    ("<#\n  What it does.\n#>\n# cu-run: runs as the verifier account\nparam()\n", True, "verifier account"),
    ("<#\n# cu-run: runs as the desktop user\n#>\n$x = 1\n", True, "desktop user"),
    ("$x = 1\n# cu-run: runs as the desktop user\n", True, None),
])
def test_who_runs_a_program(text, powershell, who):
    assert runs_as(text, powershell=powershell) == who


def test_a_program_that_says_nothing_or_the_wrong_account_is_a_finding():
    assert [f.rule for f in check_program("cd /tmp\n", "sh")] == ["runs-as"]
    assert [f.rule for f in check_program('"""Doc."""\n# cu-run: runs as root\n', "python")] == ["runs-as"]
    assert [f.rule for f in check_program("# cu-run: runs as the verifier account\n", "sh")] == ["runs-as"]
    assert [f.rule for f in check_program("# cu-run: runs as root\n", "powershell")] == ["runs-as"]
    assert check_program("# cu-run: runs as the desktop user\ncd \"$HOME\"\n", "sh") == []  # the rules are root's
    assert [f.rule for f in check_program("# cu-run: runs as root\ncd ~\n", "sh")] == ["R1"]
    assert [f.rule for f in check_program("# cu-run: runs as root\nimport os\nos.chdir(h)\n", "python")] == ["R1"]


# -- the root rules, each shown to fail

BAD = [
    ("R1", 'cd "$HOME"'),
    ("R1", 'cd "$USER_HOME" || exit 125'),
    ("R1", "cd"),
    ("R1", "cd /tmp"),
    ("R1", "x=$(cd /tmp && pwd)"),
    ("R1", "if cd x; then :; fi"),
    ("R1", "case $x in a|b) cd y ;; esac"),
    ("R1", "f() { cd /tmp; }"),
    ("R1", "sh -ec 'cd /tmp'"),
    ("R1", "env -C /tmp ls"),
    ("R1", "pushd /tmp"),
    ("R2", "python3 -c x"),
    ("R2", "python3 - <<'EOF'\nprint(1)\nEOF"),
    ("R2", "exec python3 -S -c \"$P\""),
    ("R2", "/usr/bin/python3.11 x.py"),
    ("R2", "python3 -Wignore x.py"),  # -W's value holds no option
    ("R2", 'echo "$(python3 -c x)"'),
    ("R2", "x=`python3 -c y`"),
    ("R2", "find \"$d\" -exec python3 {} \\;"),
    ("R2", "runuser -u \"$u\" -- sh -c 'python3 -c x'"),  # another user's python still judges
    ("R2", "as_user python3 -c x"),
    ("R2", "timeout 5 env -i PATH=/usr/bin python x"),
    ("R3", 'readlink -f "$f"'),
    ("R3", 'y="$(readlink -e -- "$f")"'),
    ("R3", 'readlink --canonicalize-missing "$f"'),
    ("R3", 'realpath "$f"'),
    ("R3", 'realpath -e -- "$f"'),
    ("R3", 'find -L "$d" -type f'),
    ("R3", 'find "$d" -follow'),
    ("R3", 'stat -L -c %s "$f"'),
    ("R3", 'cp -L "$f" /run/x'),
    ("R3", 'tar -chf /run/x.tar "$d"'),
    ("R4", 'su - "$u" -c x'),
    ("R4", 'su -l "$u"'),
    ("R4", 'su --login "$u" -c x'),
    ("R4", "su -lc x u"),
    ("R4", 'runuser -l "$u" -c x'),
    ("R4", 'runuser - "$u"'),
    ("R4", "bash --noprofile --norc -l -c x"),
    ("R4", "sh -l -c x"),
    ("R4", "sh -lc x"),
    ("R4", "sh -i"),
    ("R4", "sudo -i"),
    ("R4", "exec -l sh"),
    ("R5", "bash -c x"),
    ("R5", "bash --norc -c x"),
    ("R5", "bash script.sh"),
    ("R5", 'runuser -u "$u" -- bash -c x'),
    ("R6", 'chown "$u" "$USER_HOME/x"'),
    ("R6", 'chown -R "$u:" "$USER_HOME"'),
    ("R6", 'chgrp "$g" "$f"'),
    ("R6", 'chmod 600 "$f"'),
    ("R6", 'chmod -R u+rwX "$USER_HOME/.config"'),
    ("R6", "chmod 700 /home/u"),
    ("R6", "chmod -R -w ~/x"),
    ("R6", "chown -R -L root /etc/x"),
    ("R6", "chown -hR --dereference root /etc/x"),
    ("R6", "for p in /etc/a /tmp/b; do chmod 600 \"$p\"; done"),
    ("R6", 'find "$d" -exec chmod 644 {} +'),
    ("R7", 'mount -t tmpfs tmpfs "$USER_HOME/.local/share/dbus-1/services"'),
    ("R7", 'mount --bind /run/empty "$dir"'),
    ("R7", "mount -o bind,ro /run/empty /tmp/x"),
    ("R7", 'mount --target "$t" -t tmpfs tmpfs'),
    ("R7", 'umount "$USER_HOME/x"'),
    ("R8", 'echo x > "$USER_HOME/.x"'),
    ("R8", 'printf %s "$v" >>"${USER_HOME}/a"'),
    ("R8", "echo x > /tmp/f"),
    ("R8", 'cp "$TASK_DIR/a" "$USER_HOME/a"'),
    ("R8", 'cp -t "$home" a b'),
    ("R8", 'mkdir -p "$USER_HOME/x"'),
    ("R8", 'tee "$USER_HOME/x" </dev/null'),
    ("R8", 'runuser -u "$u" -- cat > "$USER_HOME/x"'),  # root's shell opens the file
    ("R8", 'd=/home/u\ntouch "$d/x"'),
    ("R8", "cmd &> ~u/log"),
]

GOOD = [
    "cd /",
    "cd -- /",
    "# cd ~",
    "echo 'cd foo'",
    "cat <<'EOF'\ncd foo\nEOF",
    "cat <<-EOF >/run/x\n\tcd foo\n\tEOF\ncd /",
    'x="cd /tmp"; printf %s "$x"',
    "python3 -I -S -c x",
    'exec python3 -I -c "$P"',
    "python3 -IS x.py",
    "python3 -W ignore -I x.py",
    "command -v python3 >/dev/null",
    "which python3",
    'readlink -- "$f"',
    'realpath -s "$f"',
    'find -P "$d" -type l',
    'find "$d" -maxdepth 1',
    'su "$u" -s /bin/sh -c x',
    'su -s/usr/local/bin/zsh "$u" -c x',
    'runuser -u "$u" -- sh -c \'cd ~ && ls\'',  # the user's shell, in the user's home
    "bash --noprofile --norc -c x",
    'chown -h "$u" "$USER_HOME/x"',
    'chown -hR "$u:" "$USER_HOME"',
    "chown -R root /etc/x",
    "chmod 600 /etc/x",
    "d=/run/cu-run-x\nchmod 700 \"$d/y\"",
    'for p in /etc/a /etc/b; do chmod 600 "$p"; done',
    'mount -t tmpfs tmpfs /run/cu-run-x',
    "mount -o remount,ro /",
    'echo x > "$HOME/.x"',  # root's own home
    "echo x >/run/x 2>&1",
    "echo hi >&2",
    'as_user sh -c \'echo x > "$1"\' sh "$USER_HOME/x"',
    'cp "$USER_HOME/a" /run/cu-run-x/a',
    "runuser -u \"$u\" -- mkdir -p \"$USER_HOME/x\"",
]


@pytest.mark.parametrize(("rule", "snippet"), BAD, ids=[f"{r}:{s[:40]}" for r, s in BAD])
def test_a_bad_snippet_is_found(rule, snippet):
    assert rule in {f.rule for f in RULES[rule](snippet)}
    assert rule in {f.rule for f in check_root_sh(snippet)}


@pytest.mark.parametrize("snippet", GOOD, ids=[s[:40] for s in GOOD])
def test_a_good_snippet_passes(snippet):
    assert check_root_sh(snippet) == []


def test_every_rule_has_bad_snippets():
    assert {rule for rule, _ in BAD} == set(RULES)


def test_a_finding_names_its_line_and_rule_through_continued_lines_and_here_documents():
    program = ("# cu-run: runs as root\n"
               "cat <<'EOF' >/run/x\n"
               "cd /tmp\n"
               "EOF\n"
               "runuser -u \"$u\" -- sh -c '\n"
               "    ls\n"
               "    python3 -c x'\n"
               "echo a \\\n"
               "  b; readlink -f \"$f\"\n")
    assert [(f.line, f.rule, f.text) for f in check_root_sh(program)] == [
        (7, "R2", "python3 -c x'"), (9, "R3", 'b; readlink -f "$f"')]


PYTHON_BAD = [
    ("R1", "import os\nos.chdir(home)"),
    ("R1", "import os\nos.chdir('/tmp')"),
    ("R3", "import os\nos.path.realpath(p)"),
    ("R3", "from pathlib import Path\nPath(p).resolve()"),
    ("R3", "import os\nos.walk(root, followlinks=True)"),
    ("R3", "import os\nos.stat(path).st_uid"),
    ("R3", "import os\nos.stat('/tmp/.X0-lock')"),
    ("R6", "import os\nos.chown(p, 1000, 1000)"),
    ("R6", "import os\nos.chmod(p, 0o600)"),
    ("R6", "import shutil\nshutil.chown(p, 'u')"),
    ("R6", "Path(p).chmod(0o600)"),
]
PYTHON_GOOD = [
    "import os\nos.chdir('/')",
    "import os\nos.walk(root)",
    "import os\nos.walk(root, followlinks=False)",
    "import os\nos.lstat(path)",
    "import os\nos.stat(path, follow_symlinks=False)",
    "import os\nos.stat('/proc/1/status')",
    "import os\nos.lchown(p, 0, 0)",
    "import os\nos.chown(p, 0, 0, follow_symlinks=False)",
    "import os\nos.chmod('/run/cu-run-x', 0o700)",
    "x = '/tmp/resolve'  # realpath in a comment",
    "import os\nos.stat(p)  # cu-run-lint: allow R3 -- p is root's own folder",
]


@pytest.mark.parametrize(("rule", "snippet"), PYTHON_BAD, ids=[f"{r}:{s[-30:]}" for r, s in PYTHON_BAD])
def test_a_bad_python_snippet_is_found(rule, snippet):
    assert [f.rule for f in check_root_python(snippet)] == [rule]


@pytest.mark.parametrize("snippet", PYTHON_GOOD, ids=[s[-30:] for s in PYTHON_GOOD])
def test_a_good_python_snippet_passes(snippet):
    assert check_root_python(snippet) == []


# -- allow markers


def test_a_marker_exempts_its_rule_on_its_line_or_the_next():
    assert check_root_sh('cd "$USER_HOME"  # cu-run-lint: allow R1 -- the prelude stands there') == []
    assert check_root_sh('# cu-run-lint: allow R1 -- why\n# another comment\ncd "$USER_HOME"') == []
    assert check_root_sh('# cu-run-lint: allow R1, R2 -- why\ncd ~ && python3 -c x') == []
    assert [f.rule for f in check_root_sh('cd ~  # cu-run-lint: allow R2 -- wrong rule')] == ["R1", "marker"]


def test_a_marker_without_a_why_or_that_exempts_nothing_is_a_finding():
    assert [f.rule for f in check_root_sh("cd ~  # cu-run-lint: allow R1")] == ["R1", "marker"]
    assert [f.rule for f in check_root_sh("cd ~  # cu-run-lint: allow R1 --  ")] == ["R1", "marker"]
    assert [f.rule for f in check_root_sh("cd /  # cu-run-lint: allow R1 -- stale")] == ["marker"]
    assert [f.rule for f in check_root_sh("cd ~  # cu-run-lint: allow R9 -- no such rule")] == ["R1", "marker"]
    assert [f.rule for f in check_root_sh("cd ~  # cu-run-lint: R1 why")] == ["R1", "marker"]
    assert [f.rule for f in check_program("# cu-run: runs as the desktop user\ncd ~  # cu-run-lint: allow R1 -- x\n",
                                          "sh")] == ["marker"]
    found, bad = markers("ls  # cu-run-lint: allow R3 -- a reason\n")
    assert (found[0].covers, found[0].rules, found[0].why, bad) == (1, ("R3",), "a reason", [])


# -- no guest program in a Python string

STRINGS_LIST = PROJECT / "tests" / "guest_program_strings.txt"
RUNNER = PROJECT / "runner"

_PROGRAM_LINE = [re.compile(p) for p in (
    # sh
    r"^\s*(if|elif|while|until)\s.*(;\s*then|;\s*do)\s*$", r"^\s*(fi|done|esac|then|else|do)\s*(;.*|\|\|.*|&&.*)?$",
    r"^\s*for \w+ in .*;\s*do\b", r"^\s*case .* in\s*$", r"^\s*exec\s", r"^\s*set -[euxo]", r"^\s*trap\s",
    r"^\s*[A-Za-z_]\w*=(\"|'|\$|[\w/.{-])", r'^\s*: "\$\{', r"^\s*[\w-]+\s*\(\)\s*\{", r"\s(\|\||&&)\s*\\?$",
    r"[12]?>\s*/dev/null", r"^\s*(mkdir|rm|cp|mv|chown|chmod|printf|echo|grep|sed|awk|find|runuser|su|sudo|kill|"
    r"pkill|sleep|test|export|local|cat|tar|install|ln|touch|mount|umount|base64)\s", r"^\s*\[ .* \]",
    r"<<-?\s*['\"]?[A-Za-z_]+['\"]?", r"^\s*[A-Z_]*EOF\s*$",
    # PowerShell
    r"^\s*\$[A-Za-z_][\w:]*\s*[+-]?=", r"^\s*foreach\s*\(", r"^\s*param\s*\(", r"^\s*(if|elseif|while)\s*\(.*\$",
    r"^\s*\}\s*(else|elseif|catch|finally)\b", r"^\s*try\s*\{", r"^\s*[A-Z][a-z]+-[A-Z][A-Za-z]+(\s|$)",
    r"^\s*function [\w-]+\s*[{(]", r"^\s*&\s*\{\s*$", r"^\s*\}\s*(\{\}|@|\$)",
    # Python
    r"^\s*def \w+\(", r"^\s*import \w", r"^\s*from [\w.]+ import ", r"^\s*(try|finally|else):\s*$",
    r"^\s*except\b.*:\s*$", r"^\s*(for|if|elif|while|with) .*:\s*$", r"^\s*print\(",
)]


def looks_like_a_program(text: str) -> bool:
    """Three or more lines, of which at least two, and a quarter, read as sh, PowerShell or Python."""
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 3:
        return False
    matched = sum(1 for line in lines if any(p.search(line) for p in _PROGRAM_LINE))
    return matched >= 2 and matched * 4 >= len(lines)


def _text(node: ast.AST) -> str | None:
    """The text of a string expression: a literal, an f-string (its values as {}), a + of them, or
    "SEP".join of a list of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and len(node.args) == 1 and isinstance(node.args[0], ast.List | ast.Tuple)):
        separator = _text(node.func.value)
        parts = [_text(e) for e in node.args[0].elts]
        if separator is not None and all(p is not None for p in parts):
            return separator.join(p for p in parts if p is not None)
    return None


def program_strings(source: str, module: str) -> list[str]:
    """MODULE:function:lines for each string in SOURCE (docstrings aside) that looks like a program."""
    tree = ast.parse(source)
    docstrings = {id(body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and (body := node.body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)}
    found: list[str] = []

    def visit(node: ast.AST, scope: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scope = node.name if scope == "<module>" else f"{scope}.{node.name}"
        text = None if id(node) in docstrings else _text(node)
        if text is not None:
            if looks_like_a_program(text):
                found.append(f"{module}:{scope}:{len(text.splitlines())}")
            return  # its parts are in it
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(tree, "<module>")
    return found


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PROJECT).with_suffix("").parts).removesuffix(".__init__")


def listed_strings() -> Counter[str]:
    lines = (line.split("#", 1)[0].strip() for line in STRINGS_LIST.read_text().splitlines())
    return Counter(line for line in lines if line)


def test_no_new_guest_program_in_a_python_string_and_the_list_is_not_stale():
    found = Counter(entry for path in sorted(RUNNER.rglob("*.py"))
                    for entry in program_strings(path.read_text(encoding="utf-8"), _module(path)))
    listed = listed_strings()
    new, stale = found - listed, listed - found
    assert not new, ("guest programs in Python strings, not in tests/guest_program_strings.txt: move each to a file "
                     f"under guest_agent/ (runner/guest/programs.py): {sorted(new.elements())}")
    assert not stale, f"listed in tests/guest_program_strings.txt but gone: take them off: {sorted(stale.elements())}"


@pytest.mark.parametrize("source", [
    'S = """set -e\nd=/run/x\nmkdir -p "$d"\n"""',
    'def f(u):\n    return f"""if [ -d {u} ]; then\n    chown -h {u} /x\nfi\n"""',
    "S = '$ErrorActionPreference = \"Stop\"\\n$x = 1\\nforeach ($i in $x) { }\\n'",
    'S = "import sys\\nimport os\\nprint(sys.argv)\\n"',
    'S = "\\n".join(["set -e", "cd /", "exec sh"])',
    'S = "set -e\\n" + "d=/run/x\\n" + "exec sh\\n"',
])
def test_the_guard_sees_a_program_in_a_string(source):
    assert len(program_strings(source, "runner.probe")) == 1


@pytest.mark.parametrize("source", [
    'def f():\n    """set -e\n    d=/run/x\n    exec sh\n    """\n',
    'HELP = """Runs the task.\n\nIf the guest is up, the runner\nconnects to it and\nwaits.\n"""',
    'MSG = "cu-run: the image is missing\\nfix: run cu-run images build\\nthen try again\\n"',
    'XML = "<domain>\\n  <name>x</name>\\n  <memory>1</memory>\\n</domain>\\n"',
])
def test_the_guard_leaves_docstrings_and_prose(source):
    assert program_strings(source, "runner.probe") == []
