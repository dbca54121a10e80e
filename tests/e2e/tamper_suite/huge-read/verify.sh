# Reads the whole file the agent wrote, as a checksum comparison does.
f="$USER_HOME/goal.txt"
[ -f "$f" ] || verdict fail "no goal.txt"
[ "$(sha256sum < "$f" | cut -c1-64)" = "$(printf 'done\n' | sha256sum | cut -c1-64)" ] && verdict pass
verdict fail "goal.txt does not say done"
