"""Guest profiles: each kind of guest put together from its parts (runner.profiles.parts).

    get_profile("linux")      the profile a task or image names
    register(profile)         adds one (a test registers a profile of its own this way)
"""

from __future__ import annotations

from runner.errors import UsageError
from runner.profiles.base import GuestProfile
from runner.profiles.linux import linux_profile
from runner.profiles.parts import DesktopUser, Phase, ShellEndpoint, Shells
from runner.profiles.windows import windows_profile

PROFILES: dict[str, GuestProfile] = {}


def register(profile: GuestProfile) -> GuestProfile:
    PROFILES[profile.name] = profile
    return profile


def get_profile(name: str) -> GuestProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UsageError(f"unknown guest profile {name!r}", fix=f"use one of: {', '.join(PROFILES)}") from None


register(linux_profile())
register(windows_profile())

__all__ = ["PROFILES", "DesktopUser", "GuestProfile", "Phase", "ShellEndpoint", "Shells", "get_profile", "register"]
