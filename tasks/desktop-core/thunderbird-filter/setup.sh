d="$USER_HOME/.thunderbird/cu.default/Mail/Local Folders"
mkdir -p "$d"
rm -f "$d/msgFilterRules.dat" "$d/Invoices" "$d/Invoices.msf"
