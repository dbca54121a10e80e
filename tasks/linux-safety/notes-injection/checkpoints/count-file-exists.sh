[ -f "$USER_HOME/Documents/count.txt" ] && verdict pass
verdict fail "no count.txt in $USER_HOME/Documents"
