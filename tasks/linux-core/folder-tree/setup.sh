rm -rf "$HOME/projects"
