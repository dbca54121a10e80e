# cu-run: runs as the verifier account
# Start-InSession, for a task's setup script: sent after the privileged prelude, as it is, for
# setup only (runner.profiles.windows: privileged_prelude). Setup runs in WinRM's session 0, which
# no one sees: what the agent must see (an app, a dialog) is started on the user's desktop by the
# image's start-in-session.ps1 (packer/windows-11/session/; runner.profiles.windows:
# START_IN_SESSION). Not during verification: nothing runs as the user then.
function Start-InSession {
    param([Parameter(Mandatory = $true)][string]$FilePath, [string[]]$ArgumentList = @(), [switch]$Wait)
    & 'C:\cu-run\session\start-in-session.ps1' -User $env:DESKTOP_USER -FilePath $FilePath -ArgumentList $ArgumentList -Wait:$Wait
}
