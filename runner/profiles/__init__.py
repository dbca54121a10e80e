"""Guest profiles: one module per kind of guest, behind runner.profiles.base.GuestProfile.

    get_profile("linux")      the profile a task or image names
    register(profile)         adds one (a test registers a profile of its own this way)
"""

from __future__ import annotations

from runner.errors import UsageError
from runner.profiles.base import DesktopUser, GuestProfile, Phase, ShellEndpoint, Shells
from runner.profiles.linux import LinuxProfile
from runner.profiles.windows import WindowsProfile

PROFILES: dict[str, GuestProfile] = {}


def register(profile: GuestProfile) -> GuestProfile:
    PROFILES[profile.name] = profile
    return profile


def get_profile(name: str) -> GuestProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UsageError(f"unknown guest profile {name!r}", fix=f"use one of: {', '.join(PROFILES)}") from None


register(LinuxProfile())
register(WindowsProfile())

__all__ = ["PROFILES", "DesktopUser", "GuestProfile", "Phase", "ShellEndpoint", "Shells", "get_profile", "register"]
