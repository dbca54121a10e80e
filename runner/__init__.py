"""cu-run: a local-hypervisor eval runner for computer-use agents."""

__version__ = "0.1.0"
