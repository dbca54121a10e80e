mkdir -p ~/Documents && printf 'ready\n' > ~/Documents/status.txt
