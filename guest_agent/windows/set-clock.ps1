# cu-run: runs as the verifier account
# Sets the guest's clock (runner.vm.episode after a restore; a task's frozen clock before its
# setup): Set-Date needs an administrator.
#
# Parameters:
#   UnixMilliseconds  the time to set, in milliseconds since 1970-01-01 UTC
param(
    [long]$UnixMilliseconds = 0
)
Set-Date -Date ([DateTimeOffset]::FromUnixTimeMilliseconds($UnixMilliseconds).LocalDateTime) | Out-Null
