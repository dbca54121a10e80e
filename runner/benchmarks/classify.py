"""What an upstream task needs, as tags, and why a task that cannot run here is left out.

Tags (any number per task):

    assets        downloads files: inputs in its setup, gold files for its metric
    web           needs the internet: a web page in its setup or evaluation, a proxy, or an
                  instruction that sends the agent to a URL or has it install something
    gdrive        needs Google Drive (an account and the internet)
    live-state    its getter reads a running app: the accessibility tree, Chrome's DevTools,
                  VLC's HTTP interface, the terminal's screen
    infeasible    scored on the agent declaring the task impossible
    needs-sudo    its setup or evaluation runs sudo (done as root here: both run privileged;
                  the agent has no sudo, see the task's fidelity note)
    systemd, gnome-settings, audio
                  its setup or evaluation needs that part of upstream's Ubuntu
                  (the hard-20 rule leaves these out)
    test-all, test-small
                  upstream lists it in test_all.json / test_small.json
    osworld|waa, <domain>
                  its benchmark, and its domain (chrome, libreoffice_calc, ...)
    offline       none of assets, web, gdrive, live-state, infeasible: runs from its JSON alone

Each task also gets one *category*, the first of infeasible, gdrive, web, live-state,
assets, offline that it has: the counts in docs/benchmarks.md are by category.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from runner.benchmarks import registry
from runner.benchmarks.upstream import UpstreamTask

CATEGORIES = ("infeasible", "gdrive", "web", "live-state", "assets", "offline")

# Getters that read state only a running app holds (not a file it saved).
LIVE_GETTERS = frozenset({
    "accessibility_tree", "active_url_from_accessTree", "active_tab_info", "open_tabs_info",
    "active_tab_html_parse", "active_tab_url_parse", "page_info", "vlc_playing_info",
    "vm_terminal_output", "vm_window_size", "vm_screen_size", "vm_active_window_title",
    # WAA's: the Clock app's timers and world clocks, Explorer's view, Paint's canvas
    "check_if_timer_started", "check_if_world_clock_exists", "is_details_view", "is_red_circle_present_on_canvas",
})
GDRIVE_STEPS = frozenset({"googledrive", "login"})
GDRIVE_GETTERS = frozenset({"googledrive_file"})

_MARKERS = {
    "systemd": re.compile(r"\bsystemctl\b|\bjournalctl\b|\btimedatectl\b|\bloginctl\b"),
    "gnome-settings": re.compile(r"\bgsettings\b|\bdconf\b|org\.gnome\.|gnome-"),
    "audio": re.compile(r"\bpactl\b|\bamixer\b|\bpulseaudio\b|\bpaplay\b|\baplay\b|\bwpctl\b"),
    "needs-sudo": re.compile(r"\bsudo\b"),
    # Installing from a package index needs the internet.
    "web": re.compile(r"\bapt(-get)?\s+(update|install)\b|\bpip3?\s+install\b|\bsnap\s+install\b"),
}
_INSTALLS = re.compile(r"\binstall(s|ing)?\b", re.IGNORECASE)
_URL = re.compile(r"https?://[^\s\"'\\<>]+")


@dataclass(frozen=True)
class Classification:
    tags: tuple[str, ...]
    category: str
    excluded: tuple[str, ...] = field(default=())  # reasons it cannot run here; empty: it can


def steps(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The config steps, then the evaluator's postconfig steps."""
    return [*(data.get("config") or []), *((data.get("evaluator") or {}).get("postconfig") or [])]


def getters(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The evaluator's result and expected getters, flattened (either may be one or a list)."""
    evaluator = data.get("evaluator") or {}
    found = []
    for key in ("result", "expected"):
        value = evaluator.get(key)
        for item in value if isinstance(value, list) else [value] if value else []:
            if isinstance(item, dict):
                found.append(item)
    return found


def metric_names(data: dict[str, Any]) -> list[str]:
    func = (data.get("evaluator") or {}).get("func")
    return [str(f) for f in (func if isinstance(func, list) else [func]) if f]


def classify(task: UpstreamTask, collectable: Iterable[str] = ()) -> Classification:
    """TASK's tags and category; COLLECTABLE: the getter types the collector supports, any other
    is a reason to leave the task out."""
    data = task.data
    body = json.dumps({"config": data.get("config"), "evaluator": data.get("evaluator")})
    urls = set(_URL.findall(body))
    asset_urls = {u for u in urls if _host_in(u, registry.get(task.bench).asset_hosts)}
    web_urls = {u for u in urls - asset_urls if not _is_loopback(u)}
    step_types = {str(s.get("type")) for s in steps(data)}
    getter_types = {str(g.get("type")) for g in getters(data)}
    instruction = str(data.get("instruction", ""))

    tags = set()
    if "infeasible" in metric_names(data):
        tags.add("infeasible")
    if step_types & GDRIVE_STEPS or getter_types & GDRIVE_GETTERS:
        tags.add("gdrive")
    if web_urls or data.get("proxy") or _URL.search(instruction) or _INSTALLS.search(instruction):
        tags.add("web")
    if getter_types & LIVE_GETTERS:
        tags.add("live-state")
    if asset_urls:
        tags.add("assets")
    commands = _command_text(data)
    tags.update(name for name, marker in _MARKERS.items() if marker.search(commands))
    category = next((c for c in CATEGORIES[:-1] if c in tags), "offline")
    if category == "offline":
        tags.add("offline")
    # Upstream's own lists: test_all (the published score's tasks), test_small (its quick subset).
    listed = {"test-all"} if task.in_test_all else set()
    listed |= {"test-small"} if task.in_test_small else set()
    return Classification(tuple(sorted(tags | listed | {task.bench, task.domain})), category,
                          tuple(_exclusions(task, tags, getter_types, set(collectable))))


def _exclusions(task: UpstreamTask, tags: set[str], getter_types: set[str], collectable: set[str]) -> list[str]:
    reasons = []
    if "infeasible" in tags:
        reasons.append("infeasible: upstream scores the agent's own 'this cannot be done', which cu-run's "
                       "agents have no action to say")
    if "gdrive" in tags:
        reasons.append("needs Google Drive: an account and the internet")
    if "web" in tags:
        reasons.append("needs the internet, and cu-run's guests have none")
    missing_app = registry.get(task.bench).missing_apps.get(task.domain)
    if missing_app:
        reasons.append(missing_app)
    if collectable:
        unknown = sorted(getter_types - collectable)
        if unknown:
            reasons.append(f"getter {', '.join(unknown)}: the collector does not gather it yet")
    return reasons


def _command_text(data: dict[str, Any]) -> str:
    """The commands a task runs in setup and evaluation, as one text to search."""
    parts = [json.dumps(s.get("parameters", {})) for s in steps(data)]
    parts += [json.dumps(g) for g in getters(data) if g.get("type") != "rule"]
    return "\n".join(parts)


def _host_in(url: str, hosts: tuple[str, ...]) -> bool:
    host = urlparse(url).hostname or ""
    return any(host == h or host.endswith("." + h) for h in hosts)


def _is_loopback(url: str) -> bool:
    return (urlparse(url).hostname or "") in ("localhost", "127.0.0.1", "0.0.0.0", "::1")
