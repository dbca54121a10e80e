"""The exec audit of one episode: marked before the agent's turn, read after the stop.

Before the turn, root marks the guest's log with the episode's nonce (ExecAudit.mark_script),
noting its size and the records the kernel has dropped. After the agent is stopped, root marks
the end and waits until the log holds it (ExecAudit.end_script: what was on its way is then
written), saying whether the logger still runs and how many records are dropped now; the host
then reads the log from the noted size on: from the guest's disk, its filesystems frozen, where
the profile can (no program of the guest reads anything), else through the admin channel. What it
holds between the markers is runner.scoring.exec_audit's to parse.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from runner.errors import InfraError
from runner.guest.base import GuestShell
from runner.profiles import GuestProfile
from runner.profiles.parts import ExecAudit
from runner.scoring.exec_audit import MAX_LOG_BYTES, ExecLog, execs_after_marker
from runner.scoring.ext4_reader import Ext4
from runner.scoring.quarantine import read_frozen_disk

AUDIT_TIMEOUT = 30.0


@dataclass(frozen=True)
class TurnMark:
    nonce: str
    offset: int  # the log's size before the marker
    lost: int  # the records the guest's kernel had dropped by then


def mark_turn(admin: GuestShell, guest: GuestProfile) -> TurnMark:
    """Marks the start of the agent's turn in the guest's exec audit. Raises InfraError when it
    cannot: before the agent, a guest that cannot log what runs is the image's defect."""
    part = guest.needs(ExecAudit, "a ran: rule")
    nonce = secrets.token_hex(12)
    result = admin.run(part.mark_script(nonce), timeout=AUDIT_TIMEOUT)
    values = _values(result.stdout)
    if not result.ok or "offset" not in values or "lost" not in values or values.get("running") != 1:
        raise InfraError(f"could not mark the agent's turn in the guest's exec audit (exit {result.exit_code}): "
                         f"{(result.stderr.strip() or result.stdout.strip())[-300:]}",
                         fix="rebuild the image (cu-run image build): images built before the exec audit have none")
    return TurnMark(nonce, values["offset"], values["lost"])


def read_turn(admin: GuestShell, guest: GuestProfile, mark: TurnMark, disk: Path | None) -> ExecLog:
    """The programs run in the turn MARK began, read after the stop: from DISK (the episode's
    overlay) where the profile's log lies on a filesystem the host reads and the admin shell can
    freeze the guest's, else through the admin channel. The logger gone, or a record dropped since
    the mark, makes the log incomplete."""
    part = guest.needs(ExecAudit, "a ran: rule")
    state = admin.run(part.end_script(mark.nonce), timeout=AUDIT_TIMEOUT + 30)
    values = _values(state.stdout)
    freezer = admin.freezer()
    if disk is not None and part.disk_filesystem == "ext4" and freezer is not None and disk.is_file():
        data = read_frozen_disk(freezer, disk, lambda fs: _log_from_disk(fs, part.log_path, mark.offset))
    else:
        data = _log_from_shell(admin, part, mark.offset)
    truncated = len(data) > MAX_LOG_BYTES
    found = execs_after_marker(data[:MAX_LOG_BYTES], mark.nonce, truncated=truncated)
    if not state.ok or "running" not in values or "lost" not in values:
        found.incomplete = f"the end of the turn could not be marked in the exec audit: {state.stderr.strip()[-200:]}"
    elif values["running"] != 1:
        found.incomplete = "the guest's audit daemon was not running after the agent's turn"
    elif values["lost"] > mark.lost:
        found.incomplete = f"the guest's kernel dropped {values['lost'] - mark.lost} audit records in the agent's turn"
    return found


def _values(output: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(offset|lost|running) ([0-9]{1,18})$", output, re.M)}


def _log_from_disk(fs: Ext4, path: str, offset: int) -> bytes:
    """PATH's bytes from OFFSET, at most one past MAX_LOG_BYTES. The log's path is root's own: a
    link on the way is not followed, and is an error."""
    number = Ext4.ROOT
    for name in (p for p in path.split("/") if p):
        found = dict(fs.entries(fs.inode(number))).get(name.encode())
        if found is None:
            raise InfraError(f"the guest's disk holds no {path}")
        if fs.inode(found).kind not in ("d", "f"):
            raise InfraError(f"{path} on the guest's disk is not a file in folders: a link or device on the way")
        number = found
    inode = fs.inode(number)
    data = fs.read_all(inode, offset + MAX_LOG_BYTES + 1)
    return data[offset:]


def _log_from_shell(admin: GuestShell, part: ExecAudit, offset: int) -> bytes:
    result = admin.run(part.read_script(offset, MAX_LOG_BYTES + 1), timeout=AUDIT_TIMEOUT * 4)
    if not result.ok:
        raise InfraError(f"could not read the guest's exec audit (exit {result.exit_code}): {result.stderr.strip()[-300:]}")
    try:
        return base64.b64decode(result.stdout.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InfraError("the guest's exec audit did not come back as base64") from None

