p="$USER_HOME/projects"
for d in alpha/docs beta/docs; do
    if [ ! -d "$p/$d" ]; then echo "FAIL $p/$d is not a folder"; exit 0; fi
done
extra=$(cd "$p" && find . -mindepth 1 | sort | tr '\n' ' ')
if [ "$extra" != "./alpha ./alpha/docs ./beta ./beta/docs " ]; then echo "FAIL unexpected contents of $p: $extra"; exit 0; fi
echo PASS
