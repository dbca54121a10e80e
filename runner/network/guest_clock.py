"""A frozen clock in the proxy: the guest's time where the guest reads it, the host's elsewhere.

At a task's frozen clock the guest checks the certificates the proxy makes for each name against
its own date, so they must be valid then; while the proxy's own checks of the real sites'
certificates (and everything else it does) must use the real time, or a clock set months back
would find every real site's certificate "not yet valid" and record nothing. So the proxy runs at
the host's time, and only the clock mitmproxy dates its certificates by is moved to the guest's:
its certs module's `datetime.datetime.now()` returns the host's time plus the offset.

Standard library and mitmproxy only: this runs in the proxy's interpreter, beside the addon.
"""

from __future__ import annotations

import datetime
import types


def date_certificates_at(offset_s: float) -> None:
    """From now on mitmproxy's certificates are dated OFFSET_S seconds from the host's time."""
    import mitmproxy.certs as certs

    shift = datetime.timedelta(seconds=offset_s)

    def now(_cls: type, tz: datetime.tzinfo | None = None) -> datetime.datetime:
        return datetime.datetime.now(tz) + shift

    # datetime.datetime in all but now(), in a copy of the datetime module that certs alone reads.
    guest_datetime = type("GuestDatetime", (datetime.datetime,), {"now": classmethod(now)})
    at_the_guests_time = types.ModuleType("datetime_at_the_guests_time")
    at_the_guests_time.__dict__.update({k: v for k, v in vars(datetime).items() if not k.startswith("__")})
    at_the_guests_time.__dict__["datetime"] = guest_datetime
    certs.__dict__["datetime"] = at_the_guests_time
