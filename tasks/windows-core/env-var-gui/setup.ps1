# Runs as the verifier account: the desktop user's HKCU is its hive under HKEY_USERS.
Remove-ItemProperty -Path "Registry::HKEY_USERS\$env:DESKTOP_USER_SID\Environment" -Name "EVALS_PROBE" -ErrorAction SilentlyContinue
Remove-ItemProperty -Path "HKLM:\SYSTEM\CurrentControlSet\Control\Session Manager\Environment" -Name "EVALS_PROBE" -ErrorAction SilentlyContinue
