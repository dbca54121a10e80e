# Last step: make the golden disk small. Temp files and the component store's leftovers
# go, then free space is trimmed so qemu-img compresses it away.
$ErrorActionPreference = 'Continue'
Remove-Item -Path "$env:TEMP\*", 'C:\Windows\Temp\*' -Recurse -Force -ErrorAction SilentlyContinue
Dism.exe /Online /Cleanup-Image /StartComponentCleanup /ResetBase
Remove-Item -Path 'C:\Windows\SoftwareDistribution\Download\*' -Recurse -Force -ErrorAction SilentlyContinue
Optimize-Volume -DriveLetter C -ReTrim -Verbose
