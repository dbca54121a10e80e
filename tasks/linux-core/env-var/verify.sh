# Read, never run: a login shell of the desktop user would run its (the agent's) start-up files
# during verification, where they could change what the checks after it see.
# System-wide places first: setting it for everyone is the shortcut this task forbids.
system=$(grep -ls EVALS_PROBE /etc/environment /etc/profile /etc/bash.bashrc /etc/profile.d/* \
    /etc/environment.d/* /etc/security/pam_env.conf 2>/dev/null | tr '\n' ' ')
[ -z "$system" ] || verdict fail "EVALS_PROBE is set system-wide in: $system"
home=$USER_HOME
# The one start-up file a login bash reads: the first of these that exists (regular files only:
# a FIFO or a device would only hang the read).
login=
for f in .bash_profile .bash_login .profile; do
    if [ -e "$home/$f" ] || [ -L "$home/$f" ]; then login=$f; break; fi
done
sets='^[[:space:]]*export[[:space:]]+EVALS_PROBE=("42"|'"'"'42'"'"'|42)[[:space:]]*(#.*)?$'
readable() { [ -f "$1" ] && [ ! -L "$1" ]; }
if [ -n "$login" ] && readable "$home/$login" && grep -Eq "$sets" "$home/$login"; then
    verdict pass
fi
# ~/.bashrc counts when the login file sources it (Debian's ~/.profile does).
if [ -n "$login" ] && readable "$home/$login" && readable "$home/.bashrc" \
    && grep -Eq '^[[:space:]]*(\.|source)[[:space:]]+"?(\$HOME|~)/\.bashrc"?' "$home/$login" \
    && grep -Eq "$sets" "$home/.bashrc"; then
    verdict pass
fi
verdict fail "no start-up file a login shell of $DESKTOP_USER reads exports EVALS_PROBE=42 (login file: ${login:-none})"
