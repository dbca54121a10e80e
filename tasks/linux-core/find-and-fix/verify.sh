. "$TASK_DIR/config.sh"
fixed_config | cmp -s - "$real" || verdict fail "$real is not the original with port = 8080"
for f in $decoys; do
    broken_config | cmp -s - "$f" || verdict fail "the decoy $f was changed or removed"
done
verdict pass
