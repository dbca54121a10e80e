"""The `cu-run` command line. Commands are thin: options -> settings -> one function. One module
per command group (images, host, vm, runs, tasks, study, cluster); their shared options in
runner.cli.options."""

from __future__ import annotations

import logging
import sys

from rich.markup import escape

from runner.cli import audit, benchmarks, cluster, host, images, runs, study, tasks, vm  # noqa: F401 - each registers its commands
from runner.cli.options import app, err
from runner.errors import CuRunError, ExitCode, InfraError, UsageError
from runner.interrupts import Insisted


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from runner.owner import raise_on_termination

    raise_on_termination()
    # Messages print unwrapped (soft_wrap): a path or a fix command broken across lines cannot be
    # copied, and a search for it in a log misses.
    try:
        app()
    except UsageError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        sys.exit(ExitCode.BAD_INPUT)
    except InfraError as exc:
        err.print(f"[bold red]infrastructure error:[/] {escape(str(exc))}", soft_wrap=True)
        sys.exit(ExitCode.INFRA)
    except CuRunError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        sys.exit(ExitCode.BAD_INPUT)
    except Insisted as exc:
        err.print(f"[bold red]interrupted:[/] {escape(str(exc))}", soft_wrap=True)
        sys.exit(ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        err.print("interrupted; everything started was removed")
        sys.exit(ExitCode.INTERRUPTED)
