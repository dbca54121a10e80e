f="$USER_HOME/Documents/sales.xlsx"
[ -f "$f" ] || verdict fail "$f does not exist"
found=$(python3 -I "$TASK_DIR/xlsx.py" read "$f")
[ -n "$found" ] || { echo "the xlsx reader printed nothing" >&2; exit 1; }
case "$found" in
    formula=*) ;;
    *) verdict fail "$f: $found" ;;
esac
formula=$(printf '%s' "$found" | sed -n 's/^formula=\([^ ]*\) value=.*/\1/p' | tr 'a-z' 'A-Z' | tr -d ' $')
value=$(printf '%s' "$found" | sed -n 's/.* value=\(.*\)$/\1/p')
case "$formula" in
    SUM\(B2:B4\)|=SUM\(B2:B4\)|OF:=SUM\(\[.B2:.B4\]\)|B2+B3+B4|=B2+B3+B4) ;;
    *) verdict fail "B5 of $f holds the formula '$formula', not one that adds B2:B4" ;;
esac
[ "${value%.0}" = 60 ] || verdict fail "B5 of $f evaluates to '$value', not 60"
verdict pass
