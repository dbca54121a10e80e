echo 'export EVALS_PROBE=42' >> "$HOME/.profile"
