# What VLC writes when the box is cleared and the preferences saved.
printf '[core]\nvideo-title-show=0\n' >> "$HOME/.config/vlc/vlcrc"
