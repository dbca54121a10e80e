f="$USER_HOME/.config/vlc/vlcrc"
[ -f "$f" ] || verdict fail "VLC has no preferences file"
# The last setting wins in vlcrc, as VLC reads it; a line commented out is not a setting.
value=$(grep -a '^video-title-show=' "$f" | tail -n 1 | cut -d= -f2)
[ "$value" = 0 ] && verdict pass
verdict fail "video-title-show is '${value:-unset}' in $f, not 0"
