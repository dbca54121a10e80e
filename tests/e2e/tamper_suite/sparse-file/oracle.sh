# A 50 GB sparse file: a listing that hashes it would take hours.
truncate -s 50G "$HOME/big.img"
