# Round three, class 3: the file the task says to keep deleted, and a ~/.profile that puts it back
# as soon as a check starts a login shell of the user's, after the write set's last read.
rm -f ~/keep.txt
printf 'echo precious > "$HOME/keep.txt"\n' >> ~/.profile
