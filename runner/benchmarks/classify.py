"""What an upstream task needs, as tags, and why a task that cannot run here is left out.

Tags (any number per task):

    assets        downloads files: inputs in its setup, gold files for its metric
    web           needs the internet: a web page in its setup or evaluation, a proxy, or an
                  instruction that sends the agent to a URL or has it install something
    cassette      a web task that can run from a recorded cassette (--net record, then
                  --net replay: docs/network.md); a web task without it needs the live
                  internet, and its exclusion says why
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

A web task's `origins` are the sites its files name (its setup's pages, its instruction's URLs):
the importer writes them as the task's `network: allow:`.

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
from runner.benchmarks.registry import UpstreamTask
from runner.network.policy import Origin, Refused
from runner.profiles import get_profile
from runner.profiles.parts import NetworkEnd

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

# What a cassette cannot stand in for: a recording holds the answers one episode was given, so a
# task whose answers must be new, or whose requests no recording can foresee, needs the live web.
_LOGIN = re.compile(r"\b(log|sign)[ -]?in(to)?\b", re.IGNORECASE)
LIVE_FEEDS = {"speedtest.net": "it measures the live network (speedtest.net), which a recording only repeats"}
RELATIVE_TIME_GETTERS = frozenset({"rule_relativeTime"})


@dataclass(frozen=True)
class Classification:
    tags: tuple[str, ...]
    category: str
    excluded: tuple[str, ...] = field(default=())  # reasons it cannot run here; empty: it can
    origins: tuple[str, ...] = ()  # a web task's sites, as origins: its network: allow:


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
    origins = _origins(web_urls | {u for u in _URL.findall(instruction) if not _is_loopback(u)}) if "web" in tags else ()
    web_reasons = _web_exclusions(task, origins, live_only(data, commands, getter_types)) if "web" in tags else []
    if "web" in tags and not web_reasons:
        tags.add("cassette")
    category = next((c for c in CATEGORIES[:-1] if c in tags), "offline")
    if category == "offline":
        tags.add("offline")
    # Upstream's own lists: test_all (the published score's tasks), test_small (its quick subset).
    listed = {"test-all"} if task.in_test_all else set()
    listed |= {"test-small"} if task.in_test_small else set()
    return Classification(tuple(sorted(tags | listed | {task.bench, task.domain})), category,
                          tuple(_exclusions(task, tags, getter_types, set(collectable)) + web_reasons), origins)


def live_only(data: dict[str, Any], commands: str, getter_types: set[str]) -> list[str]:
    """Why a web task needs the live internet, which no cassette can replay (empty: one can)."""
    instruction = str(data.get("instruction", ""))
    reasons = []
    if _MARKERS["web"].search(commands) or _INSTALLS.search(instruction):
        reasons.append("it installs software from a package index or a store, whose answers a recording "
                       "holds only for the requests one install made")
    if _LOGIN.search(instruction):
        reasons.append("it logs in to a site: a session a recording cannot renew")
    if getter_types & RELATIVE_TIME_GETTERS:
        reasons.append("its expected answer is computed from the day it is scored, against the site's offers that day")
    hosts = {urlparse(u).hostname or "" for u in _URL.findall(json.dumps(data))}
    reasons += [why for feed, why in LIVE_FEEDS.items()
                if feed in instruction or any(h == feed or h.endswith("." + feed) for h in hosts)]
    return reasons


def _web_exclusions(task: UpstreamTask, origins: tuple[str, ...], live: list[str]) -> list[str]:
    profile = registry.get(task.bench).profile.profile
    if get_profile(profile).part(NetworkEnd) is None:
        return [f"needs the internet, and {profile} guests have no network end yet (docs/network.md)"]
    if live:
        return ["needs the live internet, which a cassette cannot replay: " + "; ".join(live)]
    if not origins:
        return ["needs the internet, and names no site its network could allow"]
    return []


def _origins(urls: set[str]) -> tuple[str, ...]:
    """The origins of URLS (scheme, name and port), sorted. A URL without a valid name is left
    out, and so is one whose name has a single label: a rule's pattern ("https://www"), not a site."""
    found = set()
    for url in urls:
        parts = urlparse(url.rstrip(".,;:)]}"))
        try:
            origin = Origin.parse(f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}")
        except (ValueError, Refused):
            continue
        if "." in origin.host:
            found.add(str(origin))
    return tuple(sorted(found))


def _exclusions(task: UpstreamTask, tags: set[str], getter_types: set[str], collectable: set[str]) -> list[str]:
    reasons = []
    if "infeasible" in tags:
        reasons.append("infeasible: upstream scores the agent's own 'this cannot be done', which cu-run's "
                       "agents have no action to say")
    if "gdrive" in tags:
        reasons.append("needs Google Drive: an account and the internet")
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
