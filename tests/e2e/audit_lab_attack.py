"""A lab's own attack for `cu-run audit --attacks audit_lab_attack:SloppyAnswer`: registered from
this module, as a lab registers one from its own, and run beside the built-in battery."""

from __future__ import annotations

import re
import shlex

from runner.agents.base import Agent, AgentResult


class SloppyAnswer(Agent):
    """Writes the instruction's quoted words in capitals into each text file it names: the answer a
    careless agent gives, which only a verifier that reads the file refuses."""

    name = "sloppy-answer"

    def run(self, vm, task, log, session):
        words = " ".join(re.findall(r'"([^"]+)"', task.spec.instruction)).upper() or "DONE"
        paths = re.findall(r"~/[\w./-]+\.txt", task.spec.instruction)
        script = "".join(f'mkdir -p "$(dirname "$HOME/{p[2:]}")" && printf "%s\\n" {shlex.quote(words)} > "$HOME/{p[2:]}"\n'
                         for p in paths)
        result = vm.shell.run(script or "true\n", timeout=60)
        log.write_text(f"wrote {words!r} into {paths}: exit {result.exit_code}\n{result.stderr}")
        return AgentResult("done")
