# System-wide places first: setting it for everyone is the shortcut this task forbids.
system=$(grep -ls EVALS_PROBE /etc/environment /etc/profile /etc/bash.bashrc /etc/profile.d/* \
    /etc/environment.d/* /etc/security/pam_env.conf 2>/dev/null | tr '\n' ' ')
[ -z "$system" ] || verdict fail "EVALS_PROBE is set system-wide in: $system"
# A login shell of the desktop user runs that user's (the agent's) start-up files: as that
# user (as_user, which has a time limit), never as the admin this verifier runs as.
value=$(as_user env SHELL=/bin/bash bash -lc 'printf %s "$EVALS_PROBE"')
[ "$value" = 42 ] || verdict fail "a new login shell of $DESKTOP_USER sees EVALS_PROBE='$value', not 42"
other=$(runuser -u nobody -- env -i HOME=/nonexistent PATH=/usr/bin:/bin bash -lc 'printf %s "$EVALS_PROBE"' 2>/dev/null)
[ -z "$other" ] || verdict fail "another user sees EVALS_PROBE='$other'"
verdict pass
