. "$TASK_DIR/config.sh"
if ! fixed_config | cmp -s - "$real"; then echo "FAIL $real is not the original with port = 8080"; exit 0; fi
for f in $decoys; do
    if ! broken_config | cmp -s - "$f"; then echo "FAIL the decoy $f was changed or removed"; exit 0; fi
done
echo PASS
