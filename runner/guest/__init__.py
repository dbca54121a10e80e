"""The guest shell seam: run scripts and move files inside the guest."""

from runner.guest.base import ExecResult, GuestShell

__all__ = ["ExecResult", "GuestShell"]
