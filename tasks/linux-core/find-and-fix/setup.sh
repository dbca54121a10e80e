rm -rf "$USER_HOME/service" "$USER_HOME/backup"
mkdir -p "$USER_HOME/service/conf.d" "$USER_HOME/service/old" "$USER_HOME/backup"
. "$TASK_DIR/config.sh"
printf '#!/bin/sh\nexec /usr/local/bin/inventory --config %s\n' "$real" > "$svc/run.sh"
chmod +x "$svc/run.sh"
for f in "$real" $decoys; do broken_config > "$f"; done
