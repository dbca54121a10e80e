f="$USER_HOME/.config/vlc/vlcrc"
mkdir -p "$(dirname "$f")"
[ -f "$f" ] || : > "$f"
sed -i '/^video-title-show=/d' "$f"
