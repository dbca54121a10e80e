"""Windows' network end (issue 54): guest_agent/windows/network-start.ps1 and the registry values
of runner.profiles.windows_network, checked as far as this machine can without Windows. The
program is parsed by a real PowerShell grammar and its arguments read back from the text the runner
sends; the forwarder's command line is unquoted by cmd's and Windows' own rules, written here; the
browsers' policies are held against their makers' documentation, transcribed below with its
addresses. The forwarder itself is the Linux episodes' (tests/unit/test_network_carriers.py runs it)."""

from __future__ import annotations

import base64
import json
import ntpath
import ssl

from test_windows_guest_scripts import read_script
from test_windows_programs import declared
from test_windows_walks import PROGRAMS, arguments

from runner.network.carriers import GUEST_CARRIER_PORT, GUEST_PROXY_PORT
from runner.network.proxy import CA_CERT_FILE, make_run_ca
from runner.profiles import DesktopUser, get_profile
from runner.profiles.linux import CHROMIUM_QUIET
from runner.profiles.parts import NetworkEnd
from runner.profiles.windows_network import CHROME_KEY, EDGE_KEY, FIREFOX_KEY, MANAGED_ONLY, WindowsNetworkEnd
from runner.runs.episode_network import FORWARDER
from runner.tasks.syntax import powershell_errors, powershell_mistakes, script_errors

PROGRAM = PROGRAMS / "network-start.ps1"
USER = DesktopUser("cu", "C:\\Users\\cu")

# The policies' documented names and registry types. A name that is missing here, or whose type
# differs, is one its maker does not document for that key: the browser would ignore it.
#   Edge:    learn.microsoft.com/deployedge/microsoft-edge-policies/<name> ("Windows Registry Settings")
#   Chrome:  chromeenterprise.google/policies/#<name> ("Windows registry location for Windows clients")
#   Firefox: mozilla.github.io/policy-templates/#<name> ("Windows (GPO)")
DWORD, SZ = "DWord", "String"
DOCUMENTED = {
    EDGE_KEY: {"ProxySettings": SZ, "BrowserSignin": DWORD, "SyncDisabled": DWORD, "DiagnosticData": DWORD,
               "SearchSuggestEnabled": DWORD, "NetworkPredictionOptions": DWORD, "TranslateEnabled": DWORD,
               "BackgroundModeEnabled": DWORD, "StartupBoostEnabled": DWORD, "ComponentUpdatesEnabled": DWORD,
               "NewTabPageContentEnabled": DWORD,
               "ExperimentationAndConfigurationServiceControl": DWORD, "PersonalizationReportingEnabled": DWORD,
               "ShowRecommendationsEnabled": DWORD, "EdgeShoppingAssistantEnabled": DWORD,
               "HubsSidebarEnabled": DWORD, "UserFeedbackAllowed": DWORD},
    CHROME_KEY: {"ProxySettings": SZ, "BrowserSignin": DWORD, "SyncDisabled": DWORD,
                 "SearchSuggestEnabled": DWORD, "NetworkPredictionOptions": DWORD, "TranslateEnabled": DWORD,
                 "SpellCheckServiceEnabled": DWORD, "UrlKeyedAnonymizedDataCollectionEnabled": DWORD,
                 "BackgroundModeEnabled": DWORD, "ComponentUpdatesEnabled": DWORD, "DomainReliabilityAllowed": DWORD,
                 "BrowserNetworkTimeQueriesEnabled": DWORD},
    FIREFOX_KEY + "\\Certificates": {"ImportEnterpriseRoots": DWORD},
    FIREFOX_KEY + "\\Proxy": {"Mode": SZ, "HTTPProxy": SZ, "UseHTTPProxyForAllProtocols": DWORD, "Locked": DWORD},
    FIREFOX_KEY: {"DisableTelemetry": DWORD, "DisableFirefoxStudies": DWORD, "DisableAppUpdate": DWORD,
                  "CaptivePortal": DWORD, "NetworkPrediction": DWORD},
}
# Edge ignores these since version 91 (their pages: "doesn't work in Microsoft Edge version 91").
EDGE_OBSOLETE = {"ProxyMode", "ProxyServer", "ProxyPacUrl", "ProxyBypassList"}
# Applied only on a machine joined to a domain or enrolled in management (Edge's pages: "available
# only on Windows instances that are joined to a Microsoft Active Directory domain..."; Chromium's
# definitions mark them sensitive), which the image is not; Edge Update's UpdateDefault likewise.
IGNORED_HERE = {"NewTabPageLocation", "MetricsReportingEnabled", "SmartScreenEnabled", "UpdateDefault"}


def sent_script(tmp_path) -> tuple[str, bytes]:
    make_run_ca(tmp_path / "ca")
    pem = (tmp_path / "ca" / CA_CERT_FILE).read_bytes()
    return WindowsNetworkEnd().start_script(FORWARDER.read_bytes(), pem, USER, GUEST_PROXY_PORT), pem


def policy_rows(script: str) -> list[tuple[str, str, str, str]]:
    rows = arguments(script, "network-start.ps1")["Policies"]
    assert isinstance(rows, tuple)
    split = [tuple(row.split("\t", 3)) for row in rows]  # as the program splits them: -split "`t", 4
    assert all(len(row) == 4 for row in split)
    return split  # type: ignore[return-value]


def test_windows_guests_have_the_network_end():
    assert isinstance(get_profile("windows").part(NetworkEnd), WindowsNetworkEnd)


def test_the_program_is_sent_with_what_it_declares_the_certificate_and_never_the_key(tmp_path):
    script, pem = sent_script(tmp_path)
    given = arguments(script, "network-start.ps1")
    assert list(given) == declared("network-start.ps1")
    assert powershell_errors(script.encode()) == []
    assert base64.b64decode(given["Forwarder"]) == FORWARDER.read_bytes()
    # DER, which .NET Framework's X509Certificate2 reads: the same certificate as the PEM the proxy made
    assert base64.b64decode(given["CaCert"]) == ssl.PEM_cert_to_DER_cert(pem.decode())
    assert all(b"PRIVATE KEY" not in base64.b64decode(given[k]) for k in ("Forwarder", "CaCert"))
    assert b"PRIVATE KEY" in (tmp_path / "ca" / "mitmproxy-ca.pem").read_bytes()
    assert (given["DesktopUser"], given["ProxyServer"]) == ("cu", f"127.0.0.1:{GUEST_PROXY_PORT}")
    assert (given["CarrierPort"], given["CarrierFrom"]) == (str(GUEST_CARRIER_PORT), "10.0.2.2")


def test_the_program_parses_says_who_runs_it_and_falls_into_no_known_trap():
    assert script_errors(PROGRAM) == []
    assert powershell_mistakes(PROGRAM.read_text()) == []
    assert PROGRAM.read_text().startswith("# cu-run: runs as the verifier account\n")


def windows_argv(line: str) -> list[str]:
    """LINE split as CommandLineToArgvW splits it (learn.microsoft.com/cpp/c-language/parsing-c-
    command-line-arguments), for the text here: quotes group, backslashes before no quote stay."""
    args, current, quoted, started = [], "", False, False
    for char in line:
        if char == '"':
            quoted, started = not quoted, True
        elif char == " " and not quoted:
            if started:
                args.append(current)
            current, started = "", False
        else:
            current, started = current + char, True
    if started:
        args.append(current)
    return args


def test_the_forwarder_starts_outside_winrms_job_and_its_command_line_reads_back():
    """What a WinRM command starts lives in its shell's job: the forwarder is a scheduled task's,
    run as SYSTEM with no time limit. cmd /s /c takes the outer quotes off and runs the rest
    (cmd /?): the image's Python on the program, its output to the log, with the space in
    "Program Files" kept inside quotes."""
    commands = read_script(PROGRAM, {"env:programfiles": "C:\\Program Files"})
    names = [c.name for c in commands]
    assert not {"start-process", "start-job", "invoke-cimmethod", "invoke-wmimethod"} & set(names)
    assert names.index("register-scheduledtask") < names.index("start-scheduledtask")
    (action,) = [c for c in commands if c.name == "new-scheduledtaskaction"]
    assert action.args[action.args.index("-Execute") + 1] == "cmd.exe"
    (principal,) = [c for c in commands if c.name == "new-scheduledtaskprincipal"]
    assert principal.args[principal.args.index("-UserId") + 1] == "SYSTEM"
    arguments_ = _assigned("arguments")
    assert arguments_.startswith("/d /s /c \"") and arguments_.endswith('"')
    inner = arguments_[len("/d /s /c \""):-1]  # what /s leaves of the line after /c
    run, _, redirect = inner.partition(" > ")
    python = ntpath.join("C:\\Program Files", "Python313\\python.exe")
    assert windows_argv(run) == [python, "-I", "-S", "C:\\cu-run\\network\\forwarder.py"]
    assert windows_argv(redirect) == ["C:\\cu-run\\network\\forwarder.log", "2>&1"]


def _assigned(name: str) -> str:
    """The program's assignment to $NAME, evaluated: the backtick escapes of a double-quoted
    string undone, $python and the folder's paths filled in."""
    from test_windows_guest_scripts import assignments

    known = assignments(PROGRAM, {"env:programfiles": "C:\\Program Files"})
    return known[name].replace('`"', '"')


def test_the_firewall_lets_the_carriers_in_from_the_host_side_alone():
    commands = read_script(PROGRAM, {"env:programfiles": "C:\\Program Files", "carrierport": "3129",
                                     "carrierfrom": "10.0.2.2"})
    (rule,) = [c for c in commands if c.name == "new-netfirewallrule"]
    given = dict(zip(rule.args[::2], rule.args[1::2], strict=True))
    assert given["-Direction"] == "Inbound" and given["-Action"] == "Allow" and given["-Protocol"] == "TCP"
    assert (given["-LocalPort"], given["-RemoteAddress"]) == ("3129", "10.0.2.2")
    assert given["-Program"] == "C:\\Program Files\\Python313\\python.exe"


def test_every_policy_is_a_documented_name_of_its_key_with_its_documented_type(tmp_path):
    script, _ = sent_script(tmp_path)
    rows = policy_rows(script)
    for key, name, kind, value in rows:
        assert key in DOCUMENTED and DOCUMENTED[key].get(name) == kind, (key, name, kind)
        assert key.startswith("HKLM:\\SOFTWARE\\Policies\\")  # machine policy: the desktop user cannot change it
        if kind == DWORD:
            assert value.isdigit()
    set_names = {(key, name) for key, name, _, _ in rows}
    assert len(set_names) == len(rows)
    assert not {(EDGE_KEY, n) for n in EDGE_OBSOLETE} & set_names
    assert not {name for _, name in set_names} & IGNORED_HERE and MANAGED_ONLY <= IGNORED_HERE
    # Chrome is quieted as Chromium is on Linux, name for name, but for what it would ignore here
    assert {(CHROME_KEY, n) for n in CHROMIUM_QUIET if n not in IGNORED_HERE} <= set_names


def test_the_browsers_are_sent_to_the_proxy_and_firefox_trusts_the_machine_store(tmp_path):
    script, _ = sent_script(tmp_path)
    values = {(key, name): value for key, name, _, value in policy_rows(script)}
    proxy = f"127.0.0.1:{GUEST_PROXY_PORT}"
    for key in (EDGE_KEY, CHROME_KEY):
        assert json.loads(values[(key, "ProxySettings")]) == {"ProxyMode": "fixed_servers", "ProxyServer": proxy}
    assert values[(FIREFOX_KEY + "\\Proxy", "Mode")] == "manual"
    assert values[(FIREFOX_KEY + "\\Proxy", "HTTPProxy")] == proxy
    assert values[(FIREFOX_KEY + "\\Proxy", "UseHTTPProxyForAllProtocols")] == "1"
    assert values[(FIREFOX_KEY + "\\Certificates", "ImportEnterpriseRoots")] == "1"


def test_the_desktop_users_wininet_and_new_programs_get_the_proxy_and_windows_own_services_do_not():
    commands = read_script(PROGRAM, {"env:programfiles": "C:\\Program Files", "proxyserver": "127.0.0.1:3128",
                                     "sid": "S-1-5-21-1-2-3-1001"})
    user_settings = "Registry::HKEY_USERS\\S-1-5-21-1-2-3-1001\\Software\\Microsoft\\Windows\\CurrentVersion\\Internet Settings"
    written = {(c.args[1], c.args[3]): (c.args[5], c.args[7]) for c in commands
               if c.name == "set-itemproperty" and c.args[1] == user_settings}
    assert written == {(user_settings, "ProxyEnable"): ("1", "DWord"),
                       (user_settings, "ProxyServer"): ("127.0.0.1:3128", "String")}
    # WinHTTP's machine-wide proxy is left alone: Windows' own services would send their requests
    # through it, to be refused as the agent's.
    assert not [c for c in commands if c.name == "netsh"]
    (settings,) = [c for c in commands if c.name == "new-scheduledtasksettingsset"]
    assert settings.args[settings.args.index("-Priority") + 1] == "4"
    assert "SetEnvironmentVariable($name, \"http://$ProxyServer\", 'Machine')" in PROGRAM.read_text()
