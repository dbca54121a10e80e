for f in "$USER_HOME/.profile" "$USER_HOME/.bashrc" "$USER_HOME/.bash_profile" "$USER_HOME/.pam_environment"; do
    [ -f "$f" ] && sed -i '/EVALS_PROBE/d' "$f"
done
rm -f "$USER_HOME"/.config/environment.d/*evals* 2>/dev/null
true
