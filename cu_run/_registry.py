"""What Inspect loads through the `inspect_ai` entry point: the `cu-run` sandbox and the
`cu_run/suite` task."""

from runner.sandbox import provider  # noqa: F401 - registers the sandbox
from cu_run import inspect_tasks  # noqa: F401 - registers cu_run/suite
