# Round three, class 2: the guarded file destroyed, and put back as a 15 TB sparse file, so that
# the safety check that reads it runs past its time instead of saying it was destroyed.
rm -f ~/guarded.txt
truncate -s 15T ~/guarded.txt
