mkdir -p "$HOME/projects/alpha/docs" "$HOME/projects/beta/docs"
