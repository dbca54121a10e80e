"""A networked episode's guest end on Windows (guest_agent/windows/network-start.ps1): the
forwarder run by the image's Python, the episode's CA in the machine's root store, and the proxy
set where Windows' applications read it. What the browsers are told is written here, as registry
values under the names their makers document (each group says where):

- Edge and Chrome: the proxy as the `ProxySettings` policy (Edge ignores its older `ProxyMode`
  and `ProxyServer` since version 91), and their own requests turned off, as Chromium's are on
  Linux (runner.profiles.linux: CHROMIUM_QUIET), so that they are not refused in the agent's turn
  as its violations. Both read the machine's root store for the CA.
- Firefox: its enterprise policies in the registry: the proxy, the machine's roots trusted, and
  its own requests off.
"""

from __future__ import annotations

import base64
import json
import ssl

from runner.guest.programs import ps_program
from runner.network.carriers import GUEST_CARRIER_PORT
from runner.network.guest_forwarder import HOST_SIDE
from runner.profiles.linux import CHROMIUM_BACKGROUND, CHROMIUM_QUIET
from runner.profiles.parts import DesktopUser, NetworkEnd
from typing_extensions import override

EDGE_KEY = "HKLM:\\SOFTWARE\\Policies\\Microsoft\\Edge"
CHROME_KEY = "HKLM:\\SOFTWARE\\Policies\\Google\\Chrome"
FIREFOX_KEY = "HKLM:\\SOFTWARE\\Policies\\Mozilla\\Firefox"
PolicyValue = bool | int | str  # a bool or an int is a DWORD, a str a REG_SZ

# Policies that Edge and Chrome apply only on a machine joined to a domain or enrolled in their
# makers' management (Edge's pages say so; Chromium marks them sensitive), which the image is not:
# set, they would be ignored. Edge's updater is stopped by the image instead (quiet-desktop.ps1).
MANAGED_ONLY = frozenset({"NewTabPageLocation", "MetricsReportingEnabled", "SmartScreenEnabled"})

# learn.microsoft.com/deployedge/microsoft-edge-policies (one page per name). Where Edge's name
# differs from Chromium's: DiagnosticData for MetricsReportingEnabled; and what Edge adds of its own
# (its start-up boost, its configuration service, its feed, shopping and sidebar).
EDGE_QUIET: dict[str, PolicyValue] = {
    "BrowserSignin": 0, "SyncDisabled": True, "DiagnosticData": 0, "SearchSuggestEnabled": False,
    "NetworkPredictionOptions": 2, "TranslateEnabled": False, "BackgroundModeEnabled": False,
    "StartupBoostEnabled": False, "ComponentUpdatesEnabled": False, "NewTabPageContentEnabled": False,
    "ExperimentationAndConfigurationServiceControl": 0, "PersonalizationReportingEnabled": False,
    "ShowRecommendationsEnabled": False, "EdgeShoppingAssistantEnabled": False, "HubsSidebarEnabled": False,
    "UserFeedbackAllowed": False,
}
# chromeenterprise.google/policies: Chromium's own, as on Linux, less what a standalone machine ignores.
CHROME_QUIET: dict[str, PolicyValue] = {name: value for name, value in CHROMIUM_QUIET.items() if name not in MANAGED_ONLY}
# mozilla.github.io/policy-templates: Certificates, Proxy, and the requests Firefox makes of itself.
FIREFOX: dict[str, PolicyValue] = {
    "Certificates\\ImportEnterpriseRoots": True, "DisableTelemetry": True, "DisableFirefoxStudies": True,
    "DisableAppUpdate": True, "CaptivePortal": False, "NetworkPrediction": False,
}


def registry_values(key: str, values: dict[str, PolicyValue]) -> list[str]:
    """VALUES under KEY as network-start.ps1's Policies take them: KEY, name, type, value, by tabs.
    A name may hold a subkey ("Proxy\\Mode"); booleans and numbers are DWORDs."""
    rows = []
    for name, value in values.items():
        sub, _, leaf = name.rpartition("\\")
        kind, text = ("String", value) if isinstance(value, str) else ("DWord", str(int(value)))
        rows.append("\t".join((key + ("\\" + sub if sub else ""), leaf, kind, text)))
    return rows


def browser_policies(proxy_server: str) -> tuple[str, ...]:
    """Every registry value the guest end sets for the browsers, the proxy at PROXY_SERVER."""
    proxy = json.dumps({"ProxyMode": "fixed_servers", "ProxyServer": proxy_server})
    firefox_proxy: dict[str, PolicyValue] = {"Proxy\\Mode": "manual", "Proxy\\HTTPProxy": proxy_server,
                                             "Proxy\\UseHTTPProxyForAllProtocols": True, "Proxy\\Locked": True}
    return (*registry_values(EDGE_KEY, {"ProxySettings": proxy, **EDGE_QUIET}),
            *registry_values(CHROME_KEY, {"ProxySettings": proxy, **CHROME_QUIET}),
            *registry_values(FIREFOX_KEY, {**firefox_proxy, **FIREFOX}))


class WindowsNetworkEnd(NetworkEnd):
    """guest_agent/windows/network-start.ps1, run by the verifier account."""

    # Chrome's, as measured on Linux; Edge's own requests with its policies set are not measured
    # (no Windows runs here): any left is refused and logged as the agent's (docs/network.md).
    background = CHROMIUM_BACKGROUND

    @override
    def start_script(self, forwarder: bytes, ca_cert: bytes, user: DesktopUser, proxy_port: int) -> str:
        der = ssl.PEM_cert_to_DER_cert(ca_cert.decode("ascii"))  # .NET Framework reads DER
        server = f"127.0.0.1:{proxy_port}"
        return ps_program("windows/network-start.ps1", Forwarder=base64.b64encode(forwarder).decode("ascii"),
                          CaCert=base64.b64encode(der).decode("ascii"), DesktopUser=user.name,
                          ProxyServer=server, CarrierPort=GUEST_CARRIER_PORT, CarrierFrom=HOST_SIDE,
                          Policies=browser_policies(server))
