sed -i "/GOAL=/d" "$USER_HOME/.profile" 2>/dev/null; true
