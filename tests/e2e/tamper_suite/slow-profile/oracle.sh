# Login shells of the user now hang before they set anything.
printf 'sleep 100000\nexport GOAL=done\n' >> "$HOME/.profile"
