rm -f "$USER_HOME/Documents/pitch.odp" "$USER_HOME/Documents/.~lock.pitch.odp#"
