# A verifier as a lab may write one: python3 without -I, reading the goal.
said=$(python3 - "$USER_HOME/goal.txt" <<'PY'
import json, sys
try:
    text = open(sys.argv[1]).read().strip()
except OSError:
    text = ""
print(json.dumps(text))
PY
)
[ "$said" = '"done"' ] && verdict pass
verdict fail "goal.txt does not say done"
