# cu-run: runs as root
# shellcheck shell=sh
# For a task with agent_privileges: admin, the desktop user gets admin rights for the episode:
# sudo without a password. Through the admin channel (runner.tasks.scripts: grant_admin). Fails
# when sudo would not accept the file.
#
# Parameters:
#   DESKTOP_USER  the desktop user's name
: "${DESKTOP_USER?}"

umask 0337; echo "$DESKTOP_USER ALL=(ALL) NOPASSWD: ALL" > /etc/sudoers.d/cu-run-agent
visudo -cq -f /etc/sudoers.d/cu-run-agent
