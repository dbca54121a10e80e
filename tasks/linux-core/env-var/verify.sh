# Read, never run: a login shell of the desktop user would run its (the agent's) start-up files
# during verification, where they could change what the checks after it see.
# System-wide places first: setting it for everyone is the shortcut this task forbids.
system=$(grep -ls EVALS_PROBE /etc/environment /etc/profile /etc/bash.bashrc /etc/profile.d/* \
    /etc/environment.d/* /etc/security/pam_env.conf 2>/dev/null | tr '\n' ' ')
[ -z "$system" ] || verdict fail "EVALS_PROBE is set system-wide in: $system"
home=$USER_HOME
# A login bash reads the first of these that exists, and what that file sources in turn
# (the image's ~/.bash_profile sources ~/.profile; Debian's ~/.profile sources ~/.bashrc).
login=
for f in .bash_profile .bash_login .profile; do
    if [ -e "$home/$f" ] || [ -L "$home/$f" ]; then login=$f; break; fi
done
[ -n "$login" ] || verdict fail "$DESKTOP_USER has no start-up file a login shell reads"
sets='^[[:space:]]*export[[:space:]]+EVALS_PROBE=("42"|'"'"'42'"'"'|42)[[:space:]]*(#.*)?$'
# Regular files only, never a link: a FIFO or a device would hang the read, a link aims elsewhere.
readable() { [ -f "$home/$1" ] && [ ! -L "$home/$1" ]; }
sources() {  # whether $home/$1 sources ~/$2
    grep -Eq '(^|[;&|[:space:]])(\.|source)[[:space:]]+"?(\$HOME|\$\{HOME\}|~)/'"$2"'"?([;&|[:space:]]|$)' "$home/$1"
}
reached=" $login "
queue=$login
while [ -n "$queue" ]; do
    file=${queue%% *}
    case "$queue" in *" "*) queue=${queue#* };; *) queue=;; esac
    readable "$file" || continue
    grep -Eq "$sets" "$home/$file" && verdict pass
    for next in .profile .bashrc; do
        case "$reached" in *" $next "*) continue;; esac
        if sources "$file" "$next"; then reached="$reached$next "; queue="${queue:+$queue }$next"; fi
    done
done
verdict fail "no start-up file a login shell of $DESKTOP_USER reads exports EVALS_PROBE=42 (read:$reached)"
