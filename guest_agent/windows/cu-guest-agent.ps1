# cu-run: runs as the desktop user
<#
.SYNOPSIS
  cu-run's guest agent for Windows: the desktop's windows and its UI Automation tree, as JSON.

.DESCRIPTION
  The same commands and JSON as the Linux agent (guest_agent/linux/cu_guest_agent.py):
    cu-guest-agent.ps1 ping
    cu-guest-agent.ps1 windows
    cu-guest-agent.ps1 tree [--app NAME] [--max-depth N] [--max-nodes N]
  UI Automation only sees the desktop from inside the logged-on user's session, so the
  image runs it there (a scheduled task of the autologon user, see packer/windows-11);
  errors go to stderr with exit code 2.
#>
param(
    [Parameter(Position = 0, Mandatory = $true)]
    [ValidateSet('ping', 'windows', 'tree')]
    [string]$Command,
    # The Linux agent's flags, so the runner calls both the same way: --app, --max-depth, --max-nodes.
    [Parameter(ValueFromRemainingArguments = $true)]
    [string[]]$Rest = @()
)

$App = ''
$MaxDepth = 20
$MaxNodes = 500
for ($i = 0; $i -lt $Rest.Count; $i += 2) {
    $value = if ($i + 1 -lt $Rest.Count) { $Rest[$i + 1] } else { '' }
    switch ($Rest[$i]) {
        '--app' { $App = $value }
        '--max-depth' { $MaxDepth = [int]$value }
        '--max-nodes' { $MaxNodes = [int]$value }
        default {
            [Console]::Error.WriteLine("cu-guest-agent: unknown option $($Rest[$i])")
            exit 2
        }
    }
}

$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
[Console]::OutputEncoding = [System.Text.Encoding]::UTF8
Add-Type -AssemblyName @('UIAutomationClient', 'UIAutomationTypes')

$Version = 1
$MaxText = 200

function Get-Bounds($element) {
    $r = $element.Current.BoundingRectangle
    if ($r.IsEmpty -or $r.Width -le 0 -or $r.Height -le 0) { return $null }
    return @([int]$r.X, [int]$r.Y, [int]$r.Width, [int]$r.Height)
}

function Get-ProcessName([int]$processId) {
    try { return (Get-Process -Id $processId).ProcessName } catch { return '' }
}

function Get-Windows {
    $root = [System.Windows.Automation.AutomationElement]::RootElement
    $focused = [System.Windows.Automation.AutomationElement]::FocusedElement
    $focusedPid = if ($focused) { $focused.Current.ProcessId } else { -1 }
    $scope = [System.Windows.Automation.TreeScope]::Children
    $condition = [System.Windows.Automation.Condition]::TrueCondition
    $windows = @()
    foreach ($window in $root.FindAll($scope, $condition)) {
        $current = $window.Current
        $bounds = Get-Bounds $window
        if ($null -eq $bounds -or $current.IsOffscreen) { continue }
        $pattern = $null
        $minimized = $false
        if ($window.TryGetCurrentPattern([System.Windows.Automation.WindowPattern]::Pattern, [ref]$pattern)) {
            $minimized = $pattern.Current.WindowVisualState -eq [System.Windows.Automation.WindowVisualState]::Minimized
        }
        $windows += [ordered]@{
            id        = ('0x{0:x}' -f $current.NativeWindowHandle)
            title     = $current.Name
            app       = Get-ProcessName $current.ProcessId
            pid       = $current.ProcessId
            focused   = ($current.ProcessId -eq $focusedPid)
            minimized = $minimized
            geometry  = [ordered]@{ x = $bounds[0]; y = $bounds[1]; width = $bounds[2]; height = $bounds[3] }
        }
    }
    return [ordered]@{ windows = $windows }
}

function Get-Node($element, [int]$depth, [ref]$budget) {
    if ($budget.Value -le 0) { return $null }
    $current = $element.Current
    if ($current.IsOffscreen) { return $null }
    $budget.Value -= 1
    $node = [ordered]@{
        role = $current.ControlType.ProgrammaticName -replace '^ControlType\.', ''
        name = $current.Name
    }
    $bounds = Get-Bounds $element
    if ($null -ne $bounds) { $node.bounds = $bounds }
    $states = @()
    if ($current.HasKeyboardFocus) { $states += 'focused' }
    if (-not $current.IsEnabled) { $states += 'disabled' }
    if ($states.Count -gt 0) { $node.states = $states }
    $pattern = $null
    if ($element.TryGetCurrentPattern([System.Windows.Automation.ValuePattern]::Pattern, [ref]$pattern)) {
        $value = [string]$pattern.Current.Value
        if ($value.Length -gt $MaxText) { $value = $value.Substring(0, $MaxText) }
        if ($value) { $node.text = $value }
    }
    $walker = [System.Windows.Automation.TreeWalker]::ControlViewWalker
    if ($depth -lt $MaxDepth) {
        $children = @()
        $child = $walker.GetFirstChild($element)
        while ($null -ne $child -and $budget.Value -gt 0) {
            $childNode = Get-Node $child ($depth + 1) $budget
            if ($null -ne $childNode) { $children += $childNode }
            $child = $walker.GetNextSibling($child)
        }
        if ($children.Count -gt 0) { $node.children = $children }
    }
    return $node
}

function Get-Tree {
    $budget = $MaxNodes
    $root = [System.Windows.Automation.AutomationElement]::RootElement
    $scope = [System.Windows.Automation.TreeScope]::Children
    $apps = @()
    foreach ($window in $root.FindAll($scope, [System.Windows.Automation.Condition]::TrueCondition)) {
        if ($App -and (Get-ProcessName $window.Current.ProcessId) -ne $App) { continue }
        $node = Get-Node $window 1 ([ref]$budget)
        if ($null -ne $node) { $apps += $node }
    }
    return [ordered]@{ role = 'desktop'; name = ''; children = $apps; truncated = ($budget -le 0) }
}

try {
    switch ($Command) {
        'ping' { $result = [ordered]@{ agent = 'cu-guest-agent'; version = $Version } }
        'windows' { $result = Get-Windows }
        'tree' { $result = Get-Tree }
    }
    $result | ConvertTo-Json -Depth 100 -Compress
    exit 0
}
catch {
    [Console]::Error.WriteLine("cu-guest-agent: $($_.Exception.Message)")
    exit 2
}
