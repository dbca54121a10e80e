rm -rf "$USER_HOME/goal.txt" "$USER_HOME/releases" "$USER_HOME/current"
mkdir -p "$USER_HOME/releases/v1" "$USER_HOME/releases/v2"
ln -s releases/v1 "$USER_HOME/current"
echo 'id=1' > "$USER_HOME/releases/v1/config"
