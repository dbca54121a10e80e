"""What a guest program that runs as root must never do (docs/architecture.md, "Guest programs").

The agent is the guest's desktop user. Root acting on what that user made (a folder it can
write, a module beside the script, a link, a start-up file) is how a pass for doing nothing is
made, so a program under guest_agent/ says who runs it, on a line of its leading comments:

    # cu-run: runs as root                 (sh, Python)
    # cu-run: runs as the desktop user
    # cu-run: runs as the verifier account (PowerShell)

and an sh program that runs as root is read for the rules in RULES (a Python one for those of
them Python has calls for: check_root_python). Each rule is a pure function from the program's
text to findings, over the commands runner/tasks/sh_reader.py reads in it: comments and
here-document bodies (data) skipped, continued lines joined, quotes removed, and the commands in
$(...), backquotes, `sh -c '...'`, `find -exec`, `xargs` and the like read too, each known to run
as root or as another user (`runuser -u U --`, `su U -c`, `sudo -u U`, the prelude's `as_user`).
A word holding an expansion is a path the user may choose, unless its variables only ever take
literals (sh_reader.constants).

A violation kept on purpose carries `# cu-run-lint: allow R<n> -- <why>` at the end of its line,
or alone on the line above it (then it covers the next line that is not a comment). A marker
without a why, or one that exempts nothing, is itself a finding.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from runner.tasks.sh_reader import (
    OUTPUTS,
    SHELL_VALUED,
    SHELLS,
    Invocation,
    Word,
    constants,
    leading_options,
    program,
    short_letters,
)

RunsAs = Literal["root", "desktop user", "verifier account"]
_WHO: dict[str, RunsAs] = {"root": "root", "the desktop user": "desktop user", "the verifier account": "verifier account"}

_RUNS_AS = re.compile(r"#\s*cu-run:\s*runs as (root|the desktop user|the verifier account)\s*$")
_MARKER = re.compile(r"#\s*cu-run-lint:(.*)$")
_MARKER_BODY = re.compile(r"\s*allow\s+(R\d+(?:\s*,\s*R\d+)*)\s*(?:--\s*(.*?))?\s*$")

# Where the desktop user may make files and links: its home, the shared temporary folders, its
# runtime folder and the world-writable lock folder.
USER_WRITABLE = ("/home", "/tmp", "/var/tmp", "/dev/shm", "/run/user", "/run/lock", "/var/lock", "/var/crash",
                 "/var/mail", "/var/spool/mail")


@dataclass(frozen=True)
class Finding:
    line: int  # 1-based, in the program's file
    rule: str  # "R1".."R8", "runs-as", or "marker" for a bad or stale allow marker
    text: str  # the line, stripped
    why: str


# -- who a program runs as


def runs_as(text: str, *, powershell: bool = False) -> RunsAs | None:
    """Who TEXT declares it runs as, on a line of its leading comments; None when it declares it
    nowhere there, or more than once. Leading comments: after a shebang, lines that are blank or
    start with '#' (and for PowerShell, a <# ... #> block)."""
    found: list[str] = []
    in_block = False
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if number == 1 and line.startswith("#!"):
            continue
        if powershell and (in_block or line.startswith("<#")):
            in_block = not line.endswith("#>")
        elif line and not line.startswith("#"):
            break
        if match := _RUNS_AS.fullmatch(line):
            found.append(match.group(1))
    return _WHO[found[0]] if len(found) == 1 else None


def _values(value: str, known: dict[str, tuple[str, ...]]) -> list[str]:
    """VALUE with each variable of KNOWN (sh_reader.constants) given each of its values."""
    values = [value]
    for name in sorted(known, key=len, reverse=True):
        pattern = re.compile(r"\$\{" + name + r"\}|\$" + name + r"(?![A-Za-z0-9_])")
        if any(pattern.search(v) for v in values):
            values = [pattern.sub(x.replace("\\", "\\\\"), v) for v in values for x in known[name]]
    return values


def _user_writable(path: str) -> bool:
    path = posixpath.normpath(path)
    return any(path == area or path.startswith(area + "/") for area in USER_WRITABLE)


def user_may_choose(word: Word, known: dict[str, tuple[str, ...]]) -> bool:
    """Whether the path WORD may be one the desktop user made: one of its values (KNOWN's
    variables given theirs) expands to something the program does not fix (a parameter, a
    substitution, ~), is relative, or lies where the user may write (USER_WRITABLE)."""
    return any("$" in v or "`" in v or not v.startswith("/") or _user_writable(v) for v in _values(word.value, known))


def in_user_tree(word: Word, known: dict[str, tuple[str, ...]]) -> bool:
    """Whether the path WORD is plainly in the desktop user's tree: one of its values (KNOWN's
    variables given theirs) starts with ~NAME, with a variable whose name holds "home" in any case
    but is not HOME (root's own: $USER_HOME, $home), or with a folder of USER_WRITABLE."""
    def plainly(value: str) -> bool:
        variable = re.match(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", value)
        if variable and "home" in variable.group(1).lower() and variable.group(1) != "HOME":
            return True
        return re.match(r"~[A-Za-z_$]", value) is not None or _user_writable(value)
    return any(plainly(v) for v in _values(word.value, known))


def _flags(args: tuple[Word, ...]) -> tuple[set[str], list[Word]]:
    """The letters and long names (without a value) of ARGS' options, anywhere as GNU tools take
    them, and the operands."""
    flags: set[str] = set()
    operands: list[Word] = []
    ended = False
    for word in args:
        value = word.value
        if ended or not value.startswith("-") or value == "-":
            operands.append(word)
        elif value == "--":
            ended = True
        elif value.startswith("--"):
            flags.add(value.split("=", 1)[0])
        else:
            flags.update(value[1:])
    return flags, operands


def _finding(text: str, line: int, rule: str, why: str) -> Finding:
    lines = text.split("\n")
    return Finding(line, rule, lines[line - 1].strip() if 0 < line <= len(lines) else "", why)


def _as_root(text: str) -> Iterator[Invocation]:
    return (i for i in program(text) if i.as_root)


# -- the rules


def r1_cd(text: str) -> list[Finding]:
    """R1: no change of folder but to `/`: `cd` or `pushd` with any operand other than `/` (none
    means $HOME), and `env -C DIR`/`--chdir`. A root program standing in a folder the user can
    write runs, reads and imports what the user left there."""
    found = []
    for inv in _as_root(text):
        if inv.name in ("cd", "pushd") and [a.value for a in inv.args if a.value not in ("-P", "-L", "--")] != ["/"]:
            found.append(_finding(text, inv.line, "R1", f"{inv.name} away from /: a root program stays in /"))
        elif inv.name == "env" and any(a.value.startswith(("-C", "--chdir")) for a in leading_options(list(inv.args), ())[0]):
            found.append(_finding(text, inv.line, "R1", "env -C changes folder: a root program stays in /"))
    return found


_PYTHON = re.compile(r"python[0-9.]*")


def _isolated(args: tuple[Word, ...]) -> bool:
    """Whether python's options, before its program (-c, -m, a file or -), hold -I."""
    expect_value = False
    for word in args:
        value = word.value
        if expect_value:
            expect_value = False
            continue
        if not value.startswith("-") or value in ("-", "--"):
            return False
        letters = short_letters(value, "cmWX")
        if "I" in letters:
            return True
        if letters[-1:] in ("c", "m"):
            return False
        expect_value = letters[-1:] in ("W", "X") and value.endswith(letters[-1])
    return False


def r2_python(text: str) -> list[Finding]:
    """R2: each python run (python, python3, python3.11, ...) has -I among its options, alone or
    in a cluster such as -IS, before its program (-c, -m, a file or -). Without it Python puts the
    folder it starts in, or the script's, first on the import path, and reads PYTHON* variables.
    This holds for what the program runs as another user too: that output judges the episode."""
    return [_finding(text, inv.line, "R2", f"{inv.name} without -I imports from the folder it starts in")
            for inv in program(text) if _PYTHON.fullmatch(inv.name) and not _isolated(inv.args)]


_FOLLOWING: dict[str, set[str]] = {
    "readlink": {"f", "e", "m", "--canonicalize", "--canonicalize-existing", "--canonicalize-missing"},
    "stat": {"L", "--dereference"},
    "cp": {"L", "H", "--dereference"},
    "tar": {"h", "--dereference"},
    "du": {"L", "--dereference", "D", "--dereference-args"},
}


def r3_resolve(text: str) -> list[Finding]:
    """R3: no link resolution or following: `realpath` (unless -s/--strip/--no-symlinks),
    `readlink` -f/-e/-m (or their long names), and the options that make a tool follow links:
    find -L/-H/-follow, stat -L, cp -L/-H, tar -h, du -L/-D (and their long names). A link the
    user made leads root wherever the user chose."""
    found = []
    for inv in _as_root(text):
        flags, _ = _flags(inv.args)
        if inv.name == "realpath" and not flags & {"s", "--strip", "--no-symlinks"}:
            found.append(_finding(text, inv.line, "R3", "realpath resolves links the user may have made"))
        elif inv.name == "find":
            leading, _ = leading_options(list(inv.args), ("-D", "-O"))  # -H and -L stand before the paths
            if "-follow" in {a.value for a in inv.args} or any({"L", "H"} & set(short_letters(o.value, "DO"))
                                                               for o in leading):
                found.append(_finding(text, inv.line, "R3", "find follows links: use find -P (its default)"))
        elif flags & _FOLLOWING.get(inv.name, set()):
            found.append(_finding(text, inv.line, "R3", f"{inv.name} resolves or follows links the user may have made"))
    return found


def _reads_start_up_files(inv: Invocation) -> bool:
    args = list(inv.args)
    if inv.name in ("su", "runuser"):  # options anywhere (util-linux permutes them)
        values = [a.value for a in args[:next((i for i, a in enumerate(args) if a.value == "--"), len(args))]]
        skip = {i + 1 for i, v in enumerate(values) if v in ("-c", "-s", "-g", "-G", "-w", "-u", "--command", "--shell")}
        return any(v == "-" or v == "--login" or "l" in short_letters(v, "csgGwu")
                   for i, v in enumerate(values) if i not in skip)
    if inv.name in ("sudo", "exec"):
        options, _ = leading_options(args, ("-u", "-g", "-h", "-p", "-C", "-r", "-t", "-U", "-a"))
        letters = "".join(short_letters(o.value, "ughpCrtUa") for o in options)
        return "i" in letters if inv.name == "sudo" else "l" in letters or any(o.value == "--login" for o in options)
    if inv.name in SHELLS:
        options, _ = leading_options(args, SHELL_VALUED)
        letters = "".join(short_letters(o.value, "oO") for o in options if o.value.startswith("-"))
        return bool({"l", "i"} & set(letters)) or any(o.value in ("--login", "--interactive") for o in options)
    return False


def r4_login(text: str) -> list[Finding]:
    """R4: no login or interactive shell: su or runuser with -, -l or --login; sudo -i/--login;
    exec -l; a shell (sh, bash, dash, ...) with -l, -i, --login among its options. These run the
    user's start-up files (~/.profile, ~/.bashrc, $ENV), which the agent may have written. As
    R2, this holds for what runs as another user too."""
    return [_finding(text, inv.line, "R4", "a login or interactive shell runs the user's start-up files")
            for inv in program(text) if _reads_start_up_files(inv)]


def r5_bash(text: str) -> list[Finding]:
    """R5: bash run as a command has both --noprofile and --norc among its options (bash reads
    no start-up file then, whatever a later option or the environment says)."""
    found = []
    for inv in program(text):
        if inv.name == "bash":
            options, _ = leading_options(list(inv.args), SHELL_VALUED)
            if not {"--noprofile", "--norc"} <= {o.value for o in options}:
                found.append(_finding(text, inv.line, "R5", "bash without --noprofile --norc"))
    return found


def r6_owner_mode(text: str) -> list[Finding]:
    """R6: no owner, group or mode change that follows a link, on a path the user may have made
    (user_may_choose), recursive (-R) or not:
    - chown or chgrp without -h/--no-dereference. GNU chown follows a link named on its command
      line unless -h; with -R its default -P leaves links found in the tree alone, but busybox's
      chown -R changes what they lead to unless -h.
    - chmod without -h/--no-dereference: it follows a link named on its command line (chmod -R
      then walks the tree the link leads to). Coreutils before 9.5 (Debian 12 has 9.1) has no
      chmod -h and refuses it, so such a step needs another way, or a marker with its why.
    - any of the three with -L, -H or --dereference, on any path."""
    found = []
    known = constants(text)
    for inv in _as_root(text):
        if inv.name not in ("chown", "chgrp", "chmod"):
            continue
        flags, operands = _flags(inv.args)
        if inv.name == "chmod":  # a mode such as -w is an operand, not an option
            operands = [a for a in inv.args if not re.fullmatch(r"-[cfvRhHLP]+|--.+", a.value)]
        paths = operands if any(f.startswith("--reference") for f in flags) else operands[1:]
        if flags & {"L", "H", "--dereference"}:
            found.append(_finding(text, inv.line, "R6", f"{inv.name} told to follow links"))
        elif not flags & {"h", "--no-dereference"} and any(user_may_choose(p, known) for p in paths):
            found.append(_finding(text, inv.line, "R6", f"{inv.name} on a path the user may have made a link: "
                                  "it changes what the link leads to"))
    return found


_MOUNT_VALUED = ("-t", "-o", "-O", "-L", "-U", "-T", "-N", "--types", "--options", "--test-opts", "--label", "--uuid",
                 "--fstab", "--namespace", "--target-prefix", "--options-mode", "--options-source")


def _mount_paths(args: tuple[Word, ...]) -> list[Word]:
    """The operands of mount or umount that are paths (not a device's or file system's name), the
    values of --source and --target included."""
    paths: list[Word] = []
    after: str | None = None
    for word in args:
        value = word.value
        if after is not None:
            if after in ("--source", "--target"):
                paths.append(word)
            after = None
        elif value in ("--source", "--target") or value in _MOUNT_VALUED:
            after = value
        elif value.startswith(("--source=", "--target=")):
            paths.append(Word(value.split("=", 1)[1], word.line))
        elif value.startswith("-"):
            letters = short_letters(value, "toOLUTN")
            after = value if letters[-1:] in tuple("toOLUTN") and value == "-" + letters else None
        elif value.startswith(("/", "~", "$", "`", ".")):
            paths.append(word)
    return paths


def r7_mount(text: str) -> list[Finding]:
    """R7: no mount, bind or unmount on a path the user may have made (user_may_choose), --source
    and --target included. The kernel follows links in a mount point: a link the user made puts
    root's mount over the folder of its choice (another process's /proc entry, the X server's
    socket folder)."""
    known = constants(text)
    return [_finding(text, inv.line, "R7", f"{inv.name} on a path the user may have made a link")
            for inv in _as_root(text)
            if inv.name in ("mount", "umount") and any(user_may_choose(p, known) for p in _mount_paths(inv.args))]


_WRITERS = {"tee", "mkdir", "touch", "truncate", "mkfifo", "mknod"}  # each operand is written
_PLACERS = {"cp", "mv", "install", "ln"}  # the last operand, or -t DIR, is written


def _written(inv: Invocation) -> list[Word]:
    """The paths INV opens for writing or makes: its output redirections' targets, and the
    operands that tee, mkdir, touch, truncate, mkfifo, mknod, dd (of=) write and that cp, mv,
    install and ln place into."""
    paths = [w for w in inv.redirects if w.redirect in OUTPUTS and not re.fullmatch(r"[0-9]+|-", w.value)]
    flags, operands = _flags(inv.args)
    if inv.name in _WRITERS:
        paths += operands
    elif inv.name == "dd":
        paths += [Word(a.value[3:], a.line) for a in inv.args if a.value.startswith("of=")]
    elif inv.name in _PLACERS:
        target = [inv.args[i + 1] for i, a in enumerate(inv.args[:-1]) if a.value in ("-t", "--target-directory")]
        target += [Word(a.value.split("=", 1)[1], a.line) for a in inv.args if a.value.startswith("--target-directory=")]
        paths += target or (operands[-1:] if len(operands) > 1 else [])
    return paths


def r8_write(text: str) -> list[Finding]:
    """R8: root writes nothing in the desktop user's tree (in_user_tree): no output redirection
    there, and no tee, mkdir, touch, truncate, mkfifo, mknod, dd of=, nor a cp, mv, install or ln
    destination there. Each opens or makes the path through any link on it: a link the user made
    turns root's write onto a file of the user's choice. Write as the user (as_user, runuser -u)."""
    known = constants(text)
    return [_finding(text, inv.line, "R8", "root writes in the user's tree, through any link the user made there")
            for inv in _as_root(text) if any(in_user_tree(p, known) for p in _written(inv))]


RULES: dict[str, Callable[[str], list[Finding]]] = {
    "R1": r1_cd, "R2": r2_python, "R3": r3_resolve, "R4": r4_login, "R5": r5_bash, "R6": r6_owner_mode,
    "R7": r7_mount, "R8": r8_write,
}


# -- allow markers, and the whole check


@dataclass(frozen=True)
class Marker:
    line: int  # the marker's own line
    covers: int  # the line it exempts
    rules: tuple[str, ...]
    why: str


def markers(text: str) -> tuple[list[Marker], list[Finding]]:
    """The allow markers of TEXT, and a finding for each one that is malformed, names no known
    rule, or gives no why."""
    lines = text.split("\n")
    found: list[Marker] = []
    bad: list[Finding] = []
    for number, raw in enumerate(lines, 1):
        match = _MARKER.search(raw)
        if not match:
            continue
        body = _MARKER_BODY.fullmatch(match.group(1))
        if body is None:
            bad.append(_finding(text, number, "marker", "write it `# cu-run-lint: allow R<n> -- <why>`"))
            continue
        rules = tuple(r.strip() for r in body.group(1).split(","))
        if unknown := [r for r in rules if r not in RULES]:
            bad.append(_finding(text, number, "marker", f"no rule {', '.join(unknown)}"))
            continue
        if not (body.group(2) or "").strip():
            bad.append(_finding(text, number, "marker", "an allow marker says why, after --"))
            continue
        covers = number
        if raw.strip().startswith("#"):  # alone on its line: the next line that is not a comment
            covers = next((n for n in range(number + 1, len(lines) + 1) if not lines[n - 1].strip().startswith("#")
                           and lines[n - 1].strip()), number)
        found.append(Marker(number, covers, rules, body.group(2).strip()))
    return found, bad


def check_root_sh(text: str) -> list[Finding]:
    """The findings of an sh program that runs as root: each rule's, less those an allow marker
    exempts, plus each bad or stale marker."""
    return _exempt(text, [f for rule in RULES.values() for f in rule(text)])


def _exempt(text: str, findings: list[Finding]) -> list[Finding]:
    """FINDINGS less those TEXT's allow markers exempt, plus each bad or stale marker."""
    found, bad = markers(text)
    used: set[tuple[int, str]] = set()
    kept = []
    for finding in findings:
        marker = next((m for m in found if m.covers == finding.line and finding.rule in m.rules), None)
        if marker is None:
            kept.append(finding)
        else:
            used.add((marker.line, finding.rule))
    for marker in found:
        for rule in marker.rules:
            if (marker.line, rule) not in used:
                bad.append(_finding(text, marker.line, "marker", f"stale: {rule} finds nothing on line {marker.covers}"))
    return sorted([*kept, *bad], key=lambda f: (f.line, f.rule))


# -- Python that runs as root: the same rules where Python has the same calls


def _literal_outside(node: ast.expr | None) -> bool:
    """Whether NODE is a literal absolute path outside USER_WRITABLE."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("/")
            and not _user_writable(node.value))


def _no_follow(call: ast.Call) -> bool:
    return any(k.arg == "follow_symlinks" and isinstance(k.value, ast.Constant) and k.value.value is False
               for k in call.keywords)


def _python_finding(call: ast.Call) -> tuple[str, str] | None:
    """(rule, why) for a call that root must not make, or None."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
    first = call.args[0] if call.args else None
    if name == "chdir" and not (isinstance(first, ast.Constant) and first.value == "/"):
        return "R1", "os.chdir away from /: a root program stays in /"
    if name == "realpath" or (name == "resolve" and owner not in ("os", "os.path")):
        return "R3", f"{name} resolves links the user may have made"
    if name == "walk" and any(k.arg == "followlinks" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                              for k in call.keywords):
        return "R3", "os.walk(followlinks=...) follows links the user may have made"
    if name == "stat" and owner == "os" and not _no_follow(call) and not _literal_outside(first):
        return "R3", "os.stat follows a link: pass follow_symlinks=False, or use os.lstat"
    if name in ("chown", "chmod") and not _no_follow(call) and not (owner == "os" and _literal_outside(first)):
        return "R6", f"{name} follows a link the user may have made: pass follow_symlinks=False (os.lchown)"
    return None


def check_root_python(text: str) -> list[Finding]:
    """The findings of a Python program that runs as root: R1 (os.chdir but to "/"), R3
    (os.path.realpath, Path.resolve, os.walk(followlinks=True), os.stat without
    follow_symlinks=False on a path not fixed outside USER_WRITABLE), R6 (os.chown, os.chmod,
    shutil.chown, Path.chmod without follow_symlinks=False); allow markers as for sh. R2 holds
    for it where it is started: runner.guest.programs.python_command passes -I."""
    findings = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and (found := _python_finding(node)) is not None:
            findings.append(_finding(text, node.lineno, *found))
    return _exempt(text, findings)


def check_program(text: str, kind: Literal["sh", "python", "powershell"]) -> list[Finding]:
    """The findings of a guest program of KIND: a missing or wrong declaration of who runs it (sh
    and Python: root or the desktop user; PowerShell: the verifier account or the desktop user),
    then the rules, for a program that runs as root. A marker the rules do not read is stale."""
    who = runs_as(text, powershell=kind == "powershell")
    allowed: tuple[RunsAs, ...] = ("verifier account", "desktop user") if kind == "powershell" else ("root", "desktop user")
    if who not in allowed:
        lines = " or ".join(f"`# cu-run: runs as {'the ' if w != 'root' else ''}{w}`" for w in allowed)
        return [_finding(text, 1, "runs-as", f"say who runs it, once, in its leading comments: {lines}")]
    if who == "root":
        return check_root_sh(text) if kind == "sh" else check_root_python(text)
    found, bad = markers(text)
    return bad + [_finding(text, m.line, "marker", "stale: no rule reads a program that does not run as root")
                  for m in found]
