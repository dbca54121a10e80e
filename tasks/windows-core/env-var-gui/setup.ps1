Remove-ItemProperty -Path "HKCU:\Environment" -Name "EVALS_PROBE" -ErrorAction SilentlyContinue
Remove-ItemProperty -Path "HKLM:\SYSTEM\CurrentControlSet\Control\Session Manager\Environment" -Name "EVALS_PROBE" -ErrorAction SilentlyContinue
