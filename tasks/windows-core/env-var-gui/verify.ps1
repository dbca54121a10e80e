# Runs as the verifier account: the desktop user's HKCU is its hive under HKEY_USERS.
$system = Get-ItemProperty -Path "HKLM:\SYSTEM\CurrentControlSet\Control\Session Manager\Environment" -Name "EVALS_PROBE" -ErrorAction SilentlyContinue
if ($null -ne $system) {
    Verdict fail "EVALS_PROBE is a System variable (value '$($system.EVALS_PROBE)')"
}
$user = Get-ItemProperty -Path "Registry::HKEY_USERS\$env:DESKTOP_USER_SID\Environment" -Name "EVALS_PROBE" -ErrorAction SilentlyContinue
if ($null -eq $user) {
    Verdict fail "the desktop user's HKCU\Environment has no EVALS_PROBE"
}
if ($user.EVALS_PROBE -ne "42") {
    Verdict fail "the desktop user's HKCU\Environment EVALS_PROBE is '$($user.EVALS_PROBE)', not 42"
}
Verdict pass
