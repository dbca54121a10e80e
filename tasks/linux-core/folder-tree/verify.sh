p="$USER_HOME/projects"
for d in alpha/docs beta/docs; do
    [ -d "$p/$d" ] || verdict fail "$p/$d is not a folder"
done
extra=$(cd "$p" && find . -mindepth 1 | sort | tr '\n' ' ')
[ "$extra" = "./alpha ./alpha/docs ./beta ./beta/docs " ] || verdict fail "unexpected contents of $p: $extra"
verdict pass
