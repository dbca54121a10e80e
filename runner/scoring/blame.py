"""Who an episode's error belongs to: the infrastructure, or the agent.

An agent that cannot solve a task may try to break the guest instead, so that the episode
ends as an infrastructure error and drops out of its success rate. So blame goes by phase:

- Before the agent acts, the guest is as the image made it: whatever breaks is the
  infrastructure's (infra_error), and the episode is retried on a fresh VM.
- While the agent runs, a failure of the agent's own machinery (its process, its MCP
  client, the oracle's shell) is the agent's: agent_error.
- After the agent has acted, anything that goes wrong in the guest is the agent's doing
  until shown otherwise: the episode fails and counts in the rate.
- What the host itself sees (QEMU gone or stopped, libvirt gone) cannot come from inside
  the guest: it is the infrastructure's whatever the phase.
- A guest that powered itself off or reset (the host's lifecycle events say the shutdown came
  from inside) is the agent's doing once the agent started: a fail, whether it happened while
  the agent ran or after. The desktop user cannot do it by design (no sudo, no input devices,
  no SysRq), so one that did found a hole, and the hole must not pay.

A pure function of what was seen, tested against a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from runner.errors import CuRunError, GuestStopped

Stage = Literal["before_agent", "agent", "after_agent"]


@dataclass(frozen=True)
class Blame:
    outcome: Literal["infra_error", "agent_error", "fail"]
    reason: str
    retry: bool  # only the infrastructure's faults are retried


def blame(exc: BaseException, stage: Stage, host_fault: str | None) -> Blame:
    what = describe(exc)
    if host_fault is not None:
        return Blame("infra_error", f"{host_fault} ({what})" if host_fault not in what else what, retry=True)
    if stage == "before_agent":
        return Blame("infra_error", what, retry=True)
    if isinstance(exc, GuestStopped):
        return Blame("fail", f"{what}, after the agent started", retry=False)
    if stage == "agent":
        return Blame("agent_error", f"the agent's run broke: {what}", retry=False)
    return Blame("fail", f"the guest's command channel was broken after the agent ran: {what}", retry=False)


def describe(exc: BaseException) -> str:
    if isinstance(exc, CuRunError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"
