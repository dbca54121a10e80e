# cu-run: runs as root
# shellcheck shell=sh
# After a task's setup, which runs as root: what it made in the desktop user's home becomes the
# user's (the agent must be able to change the files the task gives it). Through the admin channel
# (runner.tasks.scripts: hand_home_to_user). Only root's files are re-owned, the home's own
# filesystem only (-xdev), and a link itself, never what it names (-h).
#
# Parameters:
#   USER_HOME     the desktop user's home
#   DESKTOP_USER  the desktop user's name
: "${USER_HOME?}"
: "${DESKTOP_USER?}"

find "$USER_HOME" -xdev -user 0 -exec chown -h "$DESKTOP_USER": {} +
