rm -rf "$USER_HOME/projects"
