# A helper where a careless verifier runs one: it writes the answer as the verifier starts it,
# after the write set's last read. (~/.config is ignored churn, so the helper itself is no change.)
mkdir -p "$HOME/.config"
printf 'echo done > "%s/answer"\n' "$HOME" > "$HOME/.config/answer-check.sh"
