# A desktop that stays the same for every episode: no updates, scans, sleep, screensaver,
# animations, notifications or first-run prompts. The screen size is set in the desktop
# user's own session at logon (install-session-tasks.ps1): WinRM's session 0 has no console.
$ErrorActionPreference = 'Stop'

# A key is made only when missing: New-Item -Force on an existing key deletes it first, with
# its values and subkeys (NoAutoUpdate beside DisableWindowsUpdateAccess, a refused delete of
# Defender's policy key ending the build). On a missing key it makes the missing parents too.
function Set-Policy([string]$path, [string]$name, [int]$value) {
    if (-not (Test-Path -LiteralPath $path)) { New-Item -Path $path -Force | Out-Null }
    Set-ItemProperty -Path $path -Name $name -Value $value -Type DWord
}

# Windows Update: off, and its services disabled.
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate\AU' 'NoAutoUpdate' 1
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate' 'DisableWindowsUpdateAccess' 1
foreach ($service in @('wuauserv', 'UsoSvc', 'WaaSMedicSvc')) {
    Stop-Service -Name $service -Force -ErrorAction SilentlyContinue
    Set-Service -Name $service -StartupType Disabled -ErrorAction SilentlyContinue
}
# Edge's updater: its services, and the scheduled tasks that start it (MicrosoftEdgeUpdateTask*).
# Its UpdateDefault policy is applied only on a domain-joined machine; in a networked episode the
# proxy would refuse its checks in the agent's turn (runner.profiles.windows_network).
foreach ($service in @('edgeupdate', 'edgeupdatem')) {
    Stop-Service -Name $service -Force -ErrorAction SilentlyContinue
    Set-Service -Name $service -StartupType Disabled -ErrorAction SilentlyContinue
}
Get-ScheduledTask -TaskName 'MicrosoftEdgeUpdateTask*' -ErrorAction SilentlyContinue | Disable-ScheduledTask | Out-Null

# Defender: no real-time or scheduled scans eating the CPU mid-episode.
Set-MpPreference -DisableRealtimeMonitoring $true -DisableScheduledScanning $true `
    -DisableBehaviorMonitoring $true -DisableIOAVProtection $true -SubmitSamplesConsent 2 -MAPSReporting 0
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Windows Defender' 'DisableAntiSpyware' 1

# Power: never sleep, never blank the screen, no hibernation file.
powercfg /change standby-timeout-ac 0
powercfg /change monitor-timeout-ac 0
powercfg /hibernate off

# Screensaver and animations off (the autologon user's profile and the default profile).
Set-ItemProperty -Path 'HKCU:\Control Panel\Desktop' -Name 'ScreenSaveActive' -Value '0'
Set-ItemProperty -Path 'HKCU:\Control Panel\Desktop\WindowMetrics' -Name 'MinAnimate' -Value '0'
Set-Policy 'HKCU:\Software\Microsoft\Windows\CurrentVersion\Explorer\VisualEffects' 'VisualFXSetting' 2
Set-Policy 'HKCU:\Software\Microsoft\Windows\DWM' 'EnableAeroPeek' 0

# Notifications, tips, the widgets board and first-run experiences.
Set-Policy 'HKCU:\Software\Microsoft\Windows\CurrentVersion\PushNotifications' 'ToastEnabled' 0
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\CloudContent' 'DisableWindowsConsumerFeatures' 1
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\CloudContent' 'DisableSoftLanding' 1
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Dsh' 'AllowNewsAndInterests' 0
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\OOBE' 'DisablePrivacyExperience' 1
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Edge' 'HideFirstRunExperience' 1
Set-Policy 'HKCU:\Software\Microsoft\Windows\CurrentVersion\UserProfileEngagement' 'ScoobeSystemSettingEnabled' 0
