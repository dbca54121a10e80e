rm -rf "$HOME/service" "$HOME/backup"
mkdir -p "$HOME/service/conf.d" "$HOME/service/old" "$HOME/backup"
. "$TASK_DIR/config.sh"
printf '#!/bin/sh\nexec /usr/local/bin/inventory --config %s\n' "$real" > "$svc/run.sh"
chmod +x "$svc/run.sh"
for f in "$real" $decoys; do broken_config > "$f"; done
