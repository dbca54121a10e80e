# The user's session-bus service folder made a link to a folder of the agent's choosing, where
# the quarantine once mounted root's tmpfs: here the X server's socket folder, so that the X
# sweep would find no X server and leave the agent's windows be.
mkdir -p "$HOME/.local/share/dbus-1"
rm -rf "$HOME/.local/share/dbus-1/services"
ln -s /tmp/.X11-unix "$HOME/.local/share/dbus-1/services"
ls -l "$HOME/.local/share/dbus-1"
