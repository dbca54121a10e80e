# A desktop that stays the same for every episode: no updates, scans, sleep, screensaver,
# animations, notifications or first-run prompts, and a fixed screen size.
$ErrorActionPreference = 'Stop'

function Set-Policy([string]$path, [string]$name, [int]$value) {
    New-Item -Path $path -Force | Out-Null
    Set-ItemProperty -Path $path -Name $name -Value $value -Type DWord
}

# Windows Update: off, and its services disabled.
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate\AU' 'NoAutoUpdate' 1
Set-Policy 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\WindowsUpdate' 'DisableWindowsUpdateAccess' 1
foreach ($service in @('wuauserv', 'UsoSvc', 'WaaSMedicSvc')) {
    Stop-Service -Name $service -Force -ErrorAction SilentlyContinue
    Set-Service -Name $service -StartupType Disabled -ErrorAction SilentlyContinue
}

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

# A fixed screen size, the one the image manifest records.
Add-Type -TypeDefinition @'
using System;
using System.Runtime.InteropServices;
public static class CuDisplay {
    [StructLayout(LayoutKind.Sequential, CharSet = CharSet.Ansi)]
    public struct DEVMODE {
        [MarshalAs(UnmanagedType.ByValTStr, SizeConst = 32)] public string dmDeviceName;
        public short dmSpecVersion, dmDriverVersion, dmSize, dmDriverExtra;
        public int dmFields, dmPositionX, dmPositionY, dmDisplayOrientation, dmDisplayFixedOutput;
        public short dmColor, dmDuplex, dmYResolution, dmTTOption, dmCollate;
        [MarshalAs(UnmanagedType.ByValTStr, SizeConst = 32)] public string dmFormName;
        public short dmLogPixels;
        public int dmBitsPerPel, dmPelsWidth, dmPelsHeight, dmDisplayFlags, dmDisplayFrequency;
    }
    [DllImport("user32.dll")] public static extern int EnumDisplaySettings(string name, int mode, ref DEVMODE dm);
    [DllImport("user32.dll")] public static extern int ChangeDisplaySettings(ref DEVMODE dm, int flags);
    public static int Set(int width, int height) {
        DEVMODE dm = new DEVMODE();
        dm.dmSize = (short)Marshal.SizeOf(typeof(DEVMODE));
        EnumDisplaySettings(null, -1, ref dm);
        dm.dmPelsWidth = width;
        dm.dmPelsHeight = height;
        dm.dmFields = 0x80000 | 0x100000;
        return ChangeDisplaySettings(ref dm, 1);
    }
}
'@
$changed = [CuDisplay]::Set([int]$env:CU_SCREEN_WIDTH, [int]$env:CU_SCREEN_HEIGHT)
if ($changed -ne 0) {
    Write-Warning "could not set the screen to $($env:CU_SCREEN_WIDTH)x$($env:CU_SCREEN_HEIGHT) (code $changed)"
}
