# Python 3.13 from the installer packer uploaded: offline, for all users, on PATH.
# In its default all-users folder, under Program Files, which only administrators may write. The
# installer puts its folders first in the machine PATH, so a folder the desktop user could write
# (C:\Python313 would inherit "Authenticated Users: Modify" from C:\) would let the agent plant
# icacls.bat or schtasks.bat there, and the verifier account runs those by name.
# check-machine-path.ps1 refuses such a PATH at the end of provisioning.
$ErrorActionPreference = 'Stop'
$installer = 'C:\cu-run\python-installer.exe'
$arguments = @('/quiet', 'InstallAllUsers=1', 'PrependPath=1', 'Include_test=0', 'Include_launcher=1')
$process = Start-Process -FilePath $installer -ArgumentList $arguments -Wait -PassThru
if ($process.ExitCode -ne 0) {
    throw "the Python installer exited $($process.ExitCode)"
}
& (Join-Path $env:ProgramFiles 'Python313\python.exe') --version
Remove-Item -LiteralPath $installer -Force
