<#
  Runs in the desktop user's interactive session at every logon (the cu-screen scheduled task,
  install-session-tasks.ps1): sets the console's screen size. From WinRM's session 0 this cannot
  work, as session 0 has no console. The result goes to C:\cu-run\spool\screen.log, which
  `cu-run check` reads back: a display driver that offers no such mode is said, not hidden.
#>
param([int]$Width, [int]$Height)
$ErrorActionPreference = 'Stop'
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
    public static string Current() {
        DEVMODE dm = new DEVMODE();
        dm.dmSize = (short)Marshal.SizeOf(typeof(DEVMODE));
        EnumDisplaySettings(null, -1, ref dm);
        return dm.dmPelsWidth + "x" + dm.dmPelsHeight;
    }
    public static int Set(int width, int height) {
        DEVMODE dm = new DEVMODE();
        dm.dmSize = (short)Marshal.SizeOf(typeof(DEVMODE));
        EnumDisplaySettings(null, -1, ref dm);
        dm.dmPelsWidth = width;
        dm.dmPelsHeight = height;
        dm.dmFields = 0x80000 | 0x100000;
        // CDS_UPDATEREGISTRY: the size stays for later logons too.
        return ChangeDisplaySettings(ref dm, 1);
    }
}
'@
$before = [CuDisplay]::Current()
$code = 0
if ($before -ne "${Width}x${Height}") {
    $code = [CuDisplay]::Set($Width, $Height)
}
$after = [CuDisplay]::Current()
$log = 'C:\cu-run\spool\screen.log'  # the user's own log, in the spool (install-session-tasks.ps1)
Set-Content -LiteralPath $log -Value "$(Get-Date -Format o) wanted ${Width}x${Height} was $before now $after code $code"
