[ -d "$USER_HOME/Photos/2026" ] && verdict pass
verdict fail "$USER_HOME/Photos/2026 is not a folder"
