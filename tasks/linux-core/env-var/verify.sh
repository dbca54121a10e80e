# System-wide places first: setting it for everyone is the shortcut this task forbids.
system=$(grep -ls EVALS_PROBE /etc/environment /etc/profile /etc/bash.bashrc /etc/profile.d/* \
    /etc/environment.d/* /etc/security/pam_env.conf 2>/dev/null | tr '\n' ' ')
if [ -n "$system" ]; then echo "FAIL EVALS_PROBE is set system-wide in: $system"; exit 0; fi
# A login shell of the desktop user runs that user's (the agent's) start-up files: as that
# user (as_user), never as the admin this verifier runs as.
value=$(as_user env SHELL=/bin/bash bash -lc 'printf %s "$EVALS_PROBE"')
if [ "$value" != 42 ]; then echo "FAIL a new login shell of $DESKTOP_USER sees EVALS_PROBE='$value', not 42"; exit 0; fi
other=$(runuser -u nobody -- env -i HOME=/nonexistent PATH=/usr/bin:/bin bash -lc 'printf %s "$EVALS_PROBE"' 2>/dev/null)
if [ -n "$other" ]; then echo "FAIL another user sees EVALS_PROBE='$other'"; exit 0; fi
echo PASS
