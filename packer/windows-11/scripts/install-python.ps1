# Python 3.13 from the installer packer uploaded: offline, for all users, on PATH.
$ErrorActionPreference = 'Stop'
$installer = 'C:\cu-run\python-installer.exe'
$arguments = @('/quiet', 'InstallAllUsers=1', 'PrependPath=1', 'Include_test=0', 'Include_launcher=1',
    'TargetDir=C:\Python313')
$process = Start-Process -FilePath $installer -ArgumentList $arguments -Wait -PassThru
if ($process.ExitCode -ne 0) {
    throw "the Python installer exited $($process.ExitCode)"
}
& 'C:\Python313\python.exe' --version
Remove-Item -LiteralPath $installer -Force
