"""The guest's own scripts (issue 51), checked where they can be without Windows: read by a real
PowerShell grammar (tree-sitter-powershell), their commands' arguments evaluated as far as plain
strings go, and what they would make on a real guest worked out from that.

- WinRM keeps its delayed start, and a cold boot's wait for the shell allows for it (item 3);
- the desktop user may start the guest agent's task: its security descriptor, parsed (item 4);
- nothing the admin or the verifier runs under C:\\cu-run is the user's to change: the ACLs the
  build's icacls calls leave, worked out item by item (item 7);
- start-in-session.ps1 -Wait reads the task's state before its result (item 8);
- cleanup.ps1 decides on DISM's code itself (item 10).
"""

from __future__ import annotations

import ntpath
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import tree_sitter_powershell
from tree_sitter import Language, Node, Parser

from runner.config import PROJECT_ROOT
from runner.guest.agent import GuestAgent, GuestAgentError
from runner.guest.base import ExecResult
from runner.images.windows_11 import GUEST_AGENT, TEMPLATE_DIR
from runner.profiles.parts import ShellAccess
from runner.profiles.windows import START_IN_SESSION, WindowsScripts, windows_profile
from runner.tasks.syntax import script_errors
from runner.vm.episode import SHELL_READY_TIMEOUT, EpisodeOptions, shell_wait_limit

SCRIPTS = TEMPLATE_DIR / "scripts"
GUEST_AGENT_DIR = PROJECT_ROOT / "guest_agent" / "windows"
USER = "cu"
USER_SID = "S-1-5-21-1111111111-2222222222-3333333333-1001"  # what NTAccount('cu').Translate gives, for the test

# -- reading PowerShell: commands and plain-string assignments, in document order

_PARSER = Parser(Language(tree_sitter_powershell.language()))
_WRAPPERS = {"pipeline", "pipeline_chain", "logical_expression", "bitwise_expression", "comparison_expression",
             "additive_expression", "multiplicative_expression", "format_expression", "range_expression",
             "array_literal_expression", "unary_expression", "key_expression"}


class NotPlain(Exception):
    """An expression that is more than strings, variables holding them, and Join-Path."""


@dataclass
class Command:
    name: str  # lower case, without .exe
    args: list[str | None]  # None: an argument that is not a plain string
    node: Node


def _text(node: Node) -> str:
    return node.text.decode() if node.text is not None else ""


def _value(node: Node, variables: dict[str, str]) -> str:
    kind = node.type
    if kind in _WRAPPERS or kind == "string_literal":
        if len(node.children) == 1:
            return _value(node.children[0], variables)
        raise NotPlain(_text(node))
    if kind == "verbatim_string_characters":
        return _text(node)[1:-1].replace("''", "'")
    if kind == "expandable_string_literal":
        raw, out, at = node.text or b"", [], node.start_byte + 1
        for child in node.children:
            out.append(raw[at - node.start_byte:child.start_byte - node.start_byte].decode())
            out.append(_value(child, variables))
            at = child.end_byte
        out.append(raw[at - node.start_byte:len(raw) - 1].decode())
        return "".join(out)
    if kind in ("generic_token", "command_parameter", "integer_literal"):
        return _text(node)
    if kind == "variable":
        name = _text(node).lstrip("$").strip("{}").lower()
        if name not in variables:
            raise NotPlain(_text(node))
        return variables[name]
    if kind == "sub_expression":
        (inner,) = [c for c in node.children if c.type == "statement_list"]
        (statement,) = inner.children
        return _value(statement, variables)
    if kind == "parenthesized_expression":
        (inner,) = [c for c in node.children if c.type == "pipeline"]
        return _value(inner, variables)
    if kind == "command" and _command_name(node) == "join-path":
        parts = [_value(a, variables) for a in _elements(node)]
        return ntpath.join(*parts)
    raise NotPlain(_text(node))


def _command_name(node: Node) -> str:
    for child in node.children:
        if child.type in ("command_name", "command_name_expr"):  # icacls, & icacls.exe
            return re.sub(r"\.exe$", "", _text(child).lower())
    return ""


def _elements(node: Node) -> list[Node]:
    for child in node.children:
        if child.type == "command_elements":
            return [c for c in child.children if c.type not in ("command_argument_sep", "redirection")]
    return []


def read_script(path: Path, variables: dict[str, str]) -> list[Command]:
    """Every command of PATH in document order, its arguments evaluated with VARIABLES (lower-case
    names, "env:cu_user" for $env:CU_USER) and the plain-string assignments met on the way.
    Function bodies are skipped: what they run is their callers' commands."""
    source = path.read_bytes()
    tree = _PARSER.parse(source)
    assert not tree.root_node.has_error, f"{path} does not parse"
    known = dict(variables)
    found: list[Command] = []

    def walk(node: Node) -> None:
        if node.type == "function_statement":
            return
        if node.type == "assignment_expression":
            left, right = node.children[0], node.children[-1]
            try:
                known[_text(left).lstrip("$").lower()] = _value(right, known)
            except NotPlain:
                pass
        if node.type == "command":
            args: list[str | None] = []
            for element in _elements(node):
                try:
                    args.append(_value(element, known))
                except NotPlain:
                    args.append(None)
            found.append(Command(_command_name(node), args, node))
        for child in node.children:
            walk(child)

    walk(tree.root_node)
    return found


def assignments(path: Path, variables: dict[str, str]) -> dict[str, str]:
    """The plain-string variables PATH has set by its end."""
    known = dict(variables)
    tree = _PARSER.parse(path.read_bytes())

    def walk(node: Node) -> None:
        if node.type == "assignment_expression":
            try:
                known[_text(node.children[0]).lstrip("$").lower()] = _value(node.children[-1], known)
            except NotPlain:
                pass
        for child in node.children:
            walk(child)

    walk(tree.root_node)
    return known


def code_of(path: Path) -> str:
    """PATH's text without comments, as PowerShell would run it."""
    text = re.sub(r"<#.*?#>", "", path.read_text(), flags=re.S)
    return "\n".join(line.split(" #", 1)[0] for line in text.splitlines() if not line.lstrip().startswith("#"))


# -- item 3: WinRM's delayed start, and the cold boot's wait for it

DELAYED_START_S = 120.0  # MS-SCMR, SERVICE_DELAYED_AUTO_START_INFO: "approximately two minutes" after the others


def test_winrm_keeps_windows_delayed_start():
    code = code_of(TEMPLATE_DIR / "setup" / "enable-winrm.ps1")
    assert re.search(r"sc\.exe config WinRM start= delayed-auto\b", code)
    assert not re.search(r"start=\s*auto\b", code), "plain auto proved unreliable (rgl/windows-vagrant c61ddf2e)"
    assert "c61ddf2e" in (TEMPLATE_DIR / "setup" / "enable-winrm.ps1").read_text()  # the why stays beside it


def test_a_cold_windows_boot_waits_for_the_delayed_start_and_a_restore_does_not():
    windows = windows_profile()
    a_boot = ShellAccess.boot_shell_timeout  # what any guest's cold boot gets to answer
    cold = shell_wait_limit(EpisodeOptions(), windows, restored=False)
    # the boot, then the delay, which load stretches: delayed services start one at a time at the lowest priority
    assert cold >= a_boot + 2 * DELAYED_START_S
    assert shell_wait_limit(EpisodeOptions(), windows, restored=True) == SHELL_READY_TIMEOUT
    assert shell_wait_limit(EpisodeOptions(shell_timeout=1), windows, restored=False) == 1


# -- item 4: the desktop user may start the guest agent's task

GENERIC = {"GA": 0x10000000, "GX": 0x20000000, "GW": 0x40000000, "GR": 0x80000000}
STANDARD = {"SD": 0x00010000, "RC": 0x00020000, "WD": 0x00040000, "WO": 0x00080000}
FILE = {"FA": 0x001F01FF, "FR": 0x00120089, "FW": 0x00120116, "FX": 0x001200A0}
RIGHTS = GENERIC | STANDARD | FILE
# Write in any form: generic write or all, delete, the DACL or the owner, and a file's own write bits
# (write data, append, extended attributes, delete child, attributes).
WRITE_BITS = 0x10000000 | 0x40000000 | 0x00010000 | 0x00040000 | 0x00080000 | 0x2 | 0x4 | 0x10 | 0x40 | 0x100
FILE_READ_EXECUTE = FILE["FR"] | FILE["FX"]
TRUSTEES = {"SY": "S-1-5-18", "BA": "S-1-5-32-544", "BU": "S-1-5-32-545", "AU": "S-1-5-11", "WD": "S-1-1-0",
            "IU": "S-1-5-4", "BG": "S-1-5-32-546", "AN": "S-1-5-7"}
BROAD = {"S-1-1-0", "S-1-5-32-545", "S-1-5-11", "S-1-5-4", "S-1-5-32-546", "S-1-5-7"}


@dataclass(frozen=True)
class Ace:
    kind: str  # A allow, D deny
    flags: str
    mask: int
    trustee: str  # a SID


def parse_sddl_dacl(sddl: str) -> tuple[str, list[Ace]]:
    """The DACL of SDDL: its flags (P, AI, ...) and its ACEs, trustees as SIDs. Strict: an ACE
    type, right or trustee this test does not know is an error, not a guess."""
    match = re.fullmatch(r"(?:O:[A-Z]{2}|O:S-[\d-]+)?(?:G:[A-Z]{2}|G:S-[\d-]+)?D:([A-Z]*)((?:\([^()]*\))*)", sddl)
    assert match, f"not an SDDL this test reads: {sddl!r}"
    aces = []
    for body in re.findall(r"\(([^()]*)\)", match.group(2)):
        kind, flags, rights, object_guid, inherit_guid, trustee = body.split(";")
        assert kind in ("A", "D") and not object_guid and not inherit_guid, body
        if rights.lower().startswith("0x"):
            mask = int(rights, 16)
        else:
            codes = re.findall(r"..", rights)
            assert "".join(codes) == rights and all(c in RIGHTS for c in codes), f"unknown right in {body}"
            mask = 0
            for code in codes:
                mask |= RIGHTS[code]
        sid = TRUSTEES.get(trustee, trustee)
        assert sid.startswith("S-1-"), f"unknown trustee in {body}"
        aces.append(Ace(kind, flags, mask, sid))
    return match.group(1), aces


def reads_and_runs(mask: int) -> bool:
    generic = GENERIC["GR"] | GENERIC["GX"]
    return mask & generic == generic or mask & FILE_READ_EXECUTE == FILE_READ_EXECUTE or bool(mask & GENERIC["GA"])


def test_the_sddl_reader_sees_grants_and_writes():
    flags, aces = parse_sddl_dacl("O:BAG:SYD:P(A;;FA;;;SY)(A;;GRGX;;;S-1-5-21-1-2-3-1001)(A;;0x1200a9;;;BU)")
    assert flags == "P" and [a.trustee for a in aces] == ["S-1-5-18", "S-1-5-21-1-2-3-1001", "S-1-5-32-545"]
    assert all(reads_and_runs(a.mask) for a in aces)
    assert aces[0].mask & WRITE_BITS and not aces[1].mask & WRITE_BITS and not aces[2].mask & WRITE_BITS
    assert parse_sddl_dacl("D:(A;;GW;;;AU)")[1][0].mask & WRITE_BITS
    with pytest.raises(AssertionError):
        parse_sddl_dacl("D:(A;;ZZ;;;BU)")


def test_the_guest_agents_task_lets_the_demoted_user_run_it_and_no_one_else_change_it():
    script = SCRIPTS / "install-guest-agent.ps1"
    started = [c.args for c in read_script(GUEST_AGENT_DIR / "invoke.ps1", {}) if c.name == "schtasks"]
    assert started == [["/run", "/tn", "cu-guest-agent"]]  # the task the user starts on its own channel
    variables = assignments(script, {"sid": USER_SID, "env:cu_user": USER})
    assert "tasksddl" in variables, "cu-guest-agent is registered with no security descriptor of its own"
    flags, aces = parse_sddl_dacl(variables["tasksddl"])
    user_grants = [a for a in aces if a.trustee == USER_SID and a.kind == "A"]
    assert user_grants and all(reads_and_runs(a.mask) for a in user_grants)
    for ace in aces:
        if ace.kind == "A" and (ace.trustee == USER_SID or ace.trustee in BROAD):
            assert not ace.mask & WRITE_BITS, f"{ace} lets the user change the task"
    assert "P" in flags  # nothing inherited from the task folder joins it
    code = code_of(script)
    # set on that task, whole: the scheduler adds no ACE of its own for the principal (TASK_DONT_ADD_PRINCIPAL_ACE)
    assert ".GetTask('cu-guest-agent').SetSecurityDescriptor($taskSddl, 0x10)" in code
    assert code.index("Register-ScheduledTask -TaskName 'cu-guest-agent'") < code.index("SetSecurityDescriptor")


class AnsweringShell:
    def __init__(self, result: ExecResult):
        self.result = result

    def run(self, script, timeout=60.0):
        return self.result


def test_a_refused_ping_says_which_channel_it_used_and_what_failed():
    refused = ExecResult(2, "", "cu-guest-agent: schtasks /run /tn cu-guest-agent, as cu, exited 1: "
                                "ERROR: Access is denied.")
    agent = GuestAgent(AnsweringShell(refused), GUEST_AGENT, WindowsScripts().quote_arguments,
                       channel="the desktop user cu's shell")
    with pytest.raises(GuestAgentError) as failed:
        agent.ping()
    assert "ping on the desktop user cu's shell" in failed.value.message
    assert "as cu, exited 1: ERROR: Access is denied." in failed.value.message
    assert "image build" in failed.value.fix
    invoke = code_of(GUEST_AGENT_DIR / "invoke.ps1")
    assert "as $env:USERNAME, exited ${code}: $why" in invoke  # the guest's side names the account and schtasks' words
    warming = (PROJECT_ROOT / "runner" / "vm" / "warming.py").read_text()
    assert "channel=f\"the desktop user {image.manifest.desktop_user.name}'s shell\"" in warming


# -- item 7: what the admin runs is not the user's to change

SY, BA, BU, AU, EVERYONE, INTERACTIVE = "S-1-5-18", "S-1-5-32-544", "S-1-5-32-545", "S-1-5-11", "S-1-1-0", "S-1-5-4"
NAMES = {"administrators": BA, "system": SY, "users": BU, "authenticated users": AU, "everyone": EVERYONE,
         USER: USER}
THE_USER = {USER, BU, AU, EVERYONE, INTERACTIVE}  # who the desktop user is, or is one of
INHERITANCE = {"OI", "CI", "IO", "NP", "I"}
SIMPLE_WRITES = {"F", "M", "W", "D"}
SPECIFIC_WRITES = {"DE", "WDAC", "WO", "MA", "GA", "GW", "WD", "AD", "WEA", "WA", "DC"}


@dataclass(frozen=True)
class Grant:
    trustee: str
    flags: frozenset[str]
    rights: frozenset[str]

    @property
    def writes(self) -> bool:
        return bool(self.rights & (SIMPLE_WRITES | SPECIFIC_WRITES))


def parse_grant(spec: str) -> Grant:
    """One icacls grant, 'who:(OI)(CI)RX' or 'who:(WD,AD)': trustee (a SID or the user's name),
    inheritance flags, rights."""
    who, _, perm = spec.rpartition(":")
    groups = re.findall(r"\(([A-Z,]+)\)", perm)
    simple = re.sub(r"\([A-Z,]+\)", "", perm)
    assert re.fullmatch(r"(\([A-Z,]+\))*(F|M|RX|R|W|D|N)?", perm), f"not an icacls grant: {spec!r}"
    flags = {g for g in groups if g in INHERITANCE}
    rights = {r for g in groups if g not in INHERITANCE for r in g.split(",")}
    if simple:
        rights.add(simple)
    trustee = who[1:] if who.startswith("*") else NAMES.get(who.lower(), who)
    assert trustee.startswith("S-1-") or trustee == USER, f"unknown trustee {who!r}"
    return Grant(trustee, frozenset(flags), frozenset(rights))


def _key(path: str) -> str:
    return path.rstrip("\\").lower()


@dataclass
class Item:
    folder: bool
    owner: str
    explicit: list[Grant] = field(default_factory=list)
    protected: bool = False


class Volume:
    """What the build's commands leave on C:: items with their owner and explicit ACEs, and the
    effective ACEs worked out through inheritance as NTFS propagates it."""

    def __init__(self) -> None:
        # C:\ as Windows 11 installs it, "Authenticated Users: Modify" on what is made below it included.
        root = [Grant(SY, frozenset({"OI", "CI"}), frozenset({"F"})),
                Grant(BA, frozenset({"OI", "CI"}), frozenset({"F"})),
                Grant(BU, frozenset({"OI", "CI"}), frozenset({"RX"})),
                Grant(AU, frozenset({"OI", "CI", "IO"}), frozenset({"M"})),
                Grant(AU, frozenset(), frozenset({"AD"}))]
        self.items: dict[str, Item] = {"c:": Item(True, SY, root, protected=True)}

    def make(self, path: str, folder: bool, owner: str = USER) -> None:
        """Makes PATH and its missing parents. The owner defaults to the desktop user: packer
        connects as that user, an administrator until the build's end, whose token's default
        owner the test does not count on."""
        parent = ntpath.dirname(_key(path))
        if _key(parent) not in self.items:
            self.make(parent, True, owner)
        self.items.setdefault(_key(path), Item(folder, owner))

    def below(self, path: str) -> list[str]:
        prefix = _key(path) + "\\"
        return sorted(p for p in self.items if p.startswith(prefix))

    def icacls(self, args: list[str | None]) -> None:
        assert all(a is not None for a in args), f"icacls with an argument this test cannot read: {args}"
        target, *options = [a for a in args if a is not None]
        recurse = "/T" in [o.upper() for o in options]
        if target.endswith("\\*"):
            paths = self.below(target[:-2]) if recurse else [p for p in self.below(target[:-2])
                                                             if "\\" not in p[len(target) - 1:]]
        else:
            assert _key(target) in self.items, f"icacls on {target}, which the build has not made"
            paths = [_key(target)] + (self.below(target) if recurse else [])
        at = 0
        while at < len(options):
            option = options[at].lower()
            at += 1
            if option in ("/t", "/c", "/q"):
                continue
            if option == "/setowner":
                owner = parse_grant(options[at] + ":F").trustee
                at += 1
                for path in paths:
                    self.items[path].owner = owner
            elif option == "/reset":
                for path in paths:
                    self.items[path].explicit, self.items[path].protected = [], False
            elif option == "/inheritance:r":
                for path in paths:
                    self.items[path].protected = True
            elif option in ("/grant", "/grant:r"):
                specs = []
                while at < len(options) and not options[at].startswith("/"):
                    specs.append(parse_grant(options[at]))
                    at += 1
                for path in paths:
                    item = self.items[path]
                    if option == "/grant:r":
                        replaced = {g.trustee for g in specs}
                        item.explicit = [g for g in item.explicit if g.trustee not in replaced]
                    item.explicit += specs
            else:
                raise AssertionError(f"an icacls option this test does not model: {option}")

    def aces(self, path: str) -> list[Grant]:
        """PATH's whole ACL: its explicit ACEs, then what it inherits unless protected."""
        key = _key(path)
        item = self.items[key]
        if item.protected or key == "c:":
            return list(item.explicit)
        inherited = []
        for grant in self.aces(ntpath.dirname(key)):
            if grant.flags & {"NP"} and "IO" not in grant.flags:
                continue
            if not item.folder:
                if "OI" in grant.flags:
                    inherited.append(Grant(grant.trustee, frozenset(), grant.rights))
            elif "CI" in grant.flags:
                keep = frozenset() if "NP" in grant.flags else grant.flags - {"IO"}
                inherited.append(Grant(grant.trustee, keep, grant.rights))
            elif "OI" in grant.flags and "NP" not in grant.flags:
                inherited.append(Grant(grant.trustee, frozenset({"OI", "IO"}), grant.rights))
        return item.explicit + inherited

    def effective(self, path: str) -> list[Grant]:
        """The ACEs that apply to PATH itself."""
        return [g for g in self.aces(path) if "IO" not in g.flags]

    def user_writes(self, path: str) -> set[str]:
        return {r for g in self.effective(path) if g.trustee in THE_USER and g.writes for r in g.rights}


def packer_provisioning_order() -> list[Path]:
    """The build's PowerShell scripts in the order windows-11.pkr.hcl runs them."""
    template = (TEMPLATE_DIR / "windows-11.pkr.hcl").read_text()
    return [SCRIPTS / name for name in re.findall(r'"\$\{path\.root\}/scripts/([\w-]+\.ps1)"', template)]


def build_volume() -> Volume:
    """C:\\cu-run as packer's uploads make it, then every New-Item, Set-Content and icacls of the
    provisioning scripts, in order."""
    volume = Volume()
    volume.make(r"C:\cu-run\python-installer.exe", folder=False)
    for source, folder in ((GUEST_AGENT_DIR, r"C:\cu-run\guest-agent"), (TEMPLATE_DIR / "session", r"C:\cu-run\session")):
        volume.make(folder, folder=True)
        for path in sorted(source.iterdir()):
            volume.make(ntpath.join(folder, path.name), folder=False)
    for script in packer_provisioning_order():
        for command in read_script(script, {"env:cu_user": USER}):
            if command.name in ("icacls", "invoke-icacls"):
                volume.icacls(command.args)
            elif command.name in ("new-item", "set-content"):
                args = command.args
                for flag in ("-path", "-literalpath"):
                    if flag in [str(a).lower() for a in args]:
                        path = args[[str(a).lower() for a in args].index(flag) + 1]
                        assert path is not None, f"{script.name}: {command.name} on a path this test cannot read"
                        if not re.match(r"[A-Za-z]:\\", path):
                            continue  # a registry key
                        is_folder = command.name == "new-item" and "directory" in [str(a).lower() for a in args]
                        volume.make(path, folder=is_folder, owner=USER)
    return volume


SPOOL = r"c:\cu-run\spool"


def test_the_acl_model_sees_what_c_gives_a_folder_made_below_it():
    volume = Volume()
    volume.make(r"C:\x\run.ps1", folder=False)
    assert volume.user_writes(r"C:\x\run.ps1") == {"M"} and volume.user_writes(r"C:\x") == {"M"}
    volume.icacls([r"C:\x", "/inheritance:r", "/grant:r", "*S-1-5-32-545:(OI)(CI)RX"])
    assert volume.user_writes(r"C:\x\run.ps1") == set()
    volume.icacls([r"C:\x", "/grant", "cu:(OI)(IO)M"])
    assert volume.user_writes(r"C:\x") == set() and volume.user_writes(r"C:\x\run.ps1") == {"M"}


def test_nothing_the_admin_runs_under_c_cu_run_is_the_users_to_change():
    volume = build_volume()
    assert volume.items["c:\\cu-run"].protected, "C:\\cu-run still inherits 'Authenticated Users: Modify' from C:\\"
    for path in ["c:\\cu-run", *volume.below(r"C:\cu-run")]:
        if path == SPOOL or path.startswith(SPOOL + "\\"):
            continue
        assert volume.user_writes(path) == set(), f"the desktop user may change {path}"
        assert volume.items[path].owner == BA, f"{path} is owned by {volume.items[path].owner}, who may rewrite its ACL"
    for run in (START_IN_SESSION, re.findall(r"'(C:\\[^']+)'", GUEST_AGENT)[0],
                r"C:\cu-run\guest-agent\serve-once.ps1", r"C:\cu-run\session\set-screen.ps1"):
        assert _key(run) in volume.items and not _key(run).startswith(SPOOL), run
        assert volume.user_writes(run) == set(), run


def test_what_the_user_writes_is_in_the_spool_and_the_spool_holds_nothing_to_run():
    volume = build_volume()
    requests = SPOOL + "\\guest-agent"
    assert requests in volume.items and volume.items[requests].folder
    # the folder: files may be added, no folder (nor junction) added, it is not removed or renamed
    assert volume.user_writes(requests) == {"WD"} and volume.items[requests].owner == BA
    assert volume.user_writes(SPOOL) == set() and volume.items[SPOOL].owner == BA
    volume.make(requests + "\\0123.args", folder=False, owner=BA)  # as invoke.ps1 files one
    assert "M" in volume.user_writes(requests + "\\0123.args")  # serve-once.ps1, as the user, removes it
    assert "M" in volume.user_writes(SPOOL + "\\screen.log")
    assert not [p for p in volume.below(SPOOL) if p.endswith(".ps1")]
    for script in (GUEST_AGENT_DIR / "invoke.ps1", GUEST_AGENT_DIR / "serve-once.ps1",
                   TEMPLATE_DIR / "session" / "set-screen.ps1"):
        assert r"C:\cu-run\spool" in script.read_text(), f"{script.name} does not use the spool"
        assert r"guest-agent\requests" not in script.read_text()


# -- item 8: start-in-session.ps1 -Wait reads the state, then the result

def test_the_wait_loop_reads_the_tasks_state_before_its_result():
    script = TEMPLATE_DIR / "session" / "start-in-session.ps1"
    tree = _PARSER.parse(script.read_bytes())
    loops = [n for n in _nodes(tree.root_node) if n.type == "while_statement"]
    assert len(loops) == 1
    reads = [c.name for c in read_script(script, {}) if c.name in ("get-scheduledtask", "get-scheduledtaskinfo")
             and loops[0].start_byte <= c.node.start_byte < loops[0].end_byte]
    assert reads == ["get-scheduledtask", "get-scheduledtaskinfo"]
    loop = _text(loops[0])
    # 267009 (SCHED_S_TASK_RUNNING) is "still running" whichever read says so, never an exit code
    assert assignments(script, {})["stillrunning"] == "267009"
    assert "$ended = $state -ne 'Running' -and $info.LastTaskResult -ne $stillRunning" in loop
    assert "(-not $Wait -or $ended)" in loop
    after = code_of(script).split("Start-Sleep -Milliseconds 200", 1)[1]
    assert "$info.LastTaskResult" in after  # the exit code is the result read after the state


def _nodes(node: Node):
    yield node
    for child in node.children:
        yield from _nodes(child)


# -- item 10: cleanup.ps1 decides on DISM's code

def dotnet_hex(code: int) -> str:
    """'0x{0:X8}' -f [int]CODE, as .NET formats a negative Int32: its two's complement."""
    return f"0x{code & 0xFFFFFFFF:08X}"


def test_cleanup_takes_dism_s_benign_codes_as_success_and_ends_with_its_own_code():
    script = SCRIPTS / "cleanup.ps1"
    code = code_of(script)
    tree = _PARSER.parse(script.read_bytes())
    (table,) = [n for n in _nodes(tree.root_node) if n.type == "hash_literal_expression"]
    benign = {_value(n, {}) for n in _nodes(table) if n.type == "key_expression"}
    # 0, 3010 ERROR_SUCCESS_REBOOT_REQUIRED, CBS_E_PENDING as PowerShell's $LASTEXITCODE holds it (-2146498554)
    assert benign == {dotnet_hex(0), dotnet_hex(3010), dotnet_hex(-2146498554)}
    assert dotnet_hex(-2146498554) == "0x800F0806"
    dism = code.index("Dism.exe /Online /Cleanup-Image /StartComponentCleanup /ResetBase")
    assert code.index("$dism = '0x{0:X8}' -f [int]$LASTEXITCODE") > dism
    # any other code is logged with the code, and the build goes on (the disk is larger, the image the same)
    assert re.search(r"WARNING: DISM [^\n]*exited \$dism", code)
    (body,) = [n for n in tree.root_node.children if n.type == "statement_list"]
    statements = [n for n in body.children if n.type != "comment"]
    assert _text(statements[-1]) == "exit 0"


# -- folders only administrators may enter, made by the image so no episode makes them after the user

def test_task_staging_and_the_collectors_folder_are_made_by_the_image_for_administrators_alone():
    volume = build_volume()
    for folder in (r"c:\cu-run\staging", r"c:\programdata\cu-run"):
        assert folder in volume.items and volume.items[folder].folder, f"the image does not make {folder}"
        assert volume.items[folder].protected, f"{folder} inherits from its parent"
        assert volume.items[folder].owner == BA, f"{folder} is owned by {volume.items[folder].owner}"
        assert volume.user_writes(folder) == set(), f"the desktop user may change {folder}"
    # Each privileged script is staged in a folder made anew inside the image's staging folder.
    assert WindowsScripts.admin_task_dir.lower().startswith("c:\\cu-run\\staging\\")


# -- the machine PATH: nothing the verifier runs by name may come from a folder the user writes

def test_python_goes_where_only_administrators_write():
    arguments = (SCRIPTS / "install-python.ps1").read_text()
    # C:\Python313 would inherit "Authenticated Users: Modify" from C:\, and the installer puts it
    # first on the machine PATH; the default all-users folder is under Program Files.
    assert "TargetDir" not in arguments and "InstallAllUsers=1" in arguments
    assert "$env:ProgramFiles" in arguments


def test_the_build_refuses_a_machine_path_folder_the_user_can_write():
    order = [p.name for p in packer_provisioning_order()]
    check = "check-machine-path.ps1"
    assert check in order and order.index(check) > order.index("install-python.ps1")
    assert order.index(check) > order.index("install-session-tasks.ps1")  # after every install of the first phase
    text = (SCRIPTS / check).read_text()
    assert script_errors(SCRIPTS / check) == []
    for sid in ("S-1-5-32-545", "S-1-5-11", "S-1-1-0", "S-1-5-4"):  # Users, Authenticated Users, Everyone, Interactive
        assert f"'{sid}'" in text
    assert "$env:CU_USER" in text and "GetEnvironmentVariable('Path', 'Machine')" in text
    assert "0x2 -bor 0x4" in text and "throw" in text  # WriteData, AppendData: a refusal, not a warning


# -- WindowsAgentArena's collector: the evidence stays the administrators'

WAA_STEPS = PROJECT_ROOT / "guest_agent" / "windows" / "benchmarks" / "waa-steps.ps1"


def powershell_function(text: str, name: str) -> str:
    """The body of function NAME in TEXT (up to the next top-level function)."""
    start = text.index(f"function {name}")
    following = text.find("\nfunction ", start + 1)
    return text[start:following if following != -1 else len(text)]


def test_the_collector_refuses_an_export_folder_the_image_did_not_make_for_administrators():
    begin = powershell_function(WAA_STEPS.read_text(), "Waa-ExportBegin")
    assert "AreAccessRulesProtected" in begin and "'S-1-5-32-544'" in begin and "throw" in begin
    assert begin.index("throw") < begin.index("New-Item")  # checked before anything is made there


def test_a_collected_command_writes_its_two_files_and_runs_no_autorun():
    collect = powershell_function(WAA_STEPS.read_text(), "Waa-CollectCommand")
    assert "@('/d', '/c'," in collect  # cmd's AutoRun, from the user's registry, is code of the agent's
    grants = re.findall(r"icacls\.exe (\$\w+) /grant", collect)
    assert grants == ["$file"] and "foreach ($file in $out, $err)" in collect  # the two files, nothing else
    assert collect.index("icacls.exe") < collect.index("Waa-AsUser")
