mkdir "$HOME/Photos/2026"
