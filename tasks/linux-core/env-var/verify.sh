# System-wide places first: setting it for everyone is the shortcut this task forbids.
system=$(grep -ls EVALS_PROBE /etc/environment /etc/profile /etc/bash.bashrc /etc/profile.d/* \
    /etc/environment.d/* /etc/security/pam_env.conf 2>/dev/null | tr '\n' ' ')
if [ -n "$system" ]; then echo "FAIL EVALS_PROBE is set system-wide in: $system"; exit 0; fi
value=$(env -i HOME="$HOME" USER=cu LOGNAME=cu SHELL=/bin/bash PATH=/usr/bin:/bin bash -lc 'printf %s "$EVALS_PROBE"')
if [ "$value" != 42 ]; then echo "FAIL a new login shell of cu sees EVALS_PROBE='$value', not 42"; exit 0; fi
other=$(sudo -n -u nobody env -i HOME=/nonexistent PATH=/usr/bin:/bin bash -lc 'printf %s "$EVALS_PROBE"' 2>/dev/null)
if [ -n "$other" ]; then echo "FAIL another user sees EVALS_PROBE='$other'"; exit 0; fi
echo PASS
