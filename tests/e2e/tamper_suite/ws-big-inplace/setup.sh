rm -f "$USER_HOME/goal.txt"
mkdir -p "$USER_HOME/data"
truncate -s 70M "$USER_HOME/data/big.bin"   # over the lister's 64 MiB hash limit
