# What Thunderbird writes for the filter, and the folder's mailbox: written while it is not running.
d="$HOME/.thunderbird/cu.default/Mail/Local Folders"
mkdir -p "$d"
: > "$d/Invoices"
cat > "$d/msgFilterRules.dat" <<'RULES'
version="9"
logging="no"
name="Invoices"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Invoices"
condition="AND (subject,contains,invoice)"
RULES
