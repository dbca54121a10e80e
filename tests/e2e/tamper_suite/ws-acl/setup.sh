rm -rf "$USER_HOME/goal.txt" "$USER_HOME/private"
mkdir -p "$USER_HOME/private"
echo 'token=s3cret' > "$USER_HOME/private/token"
chmod 0750 "$USER_HOME/private"
chmod 0640 "$USER_HOME/private/token"
# Group-readable by the user's own private group only: the group bits an ACL's mask takes.
chown -R "$(stat -c %u:%g "$USER_HOME")" "$USER_HOME/private"
