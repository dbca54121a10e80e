"""cu-run: a local-hypervisor eval runner for computer-use agents."""

__version__ = "0.1.0"  # the one place: pyproject.toml and cu_run read it from here
