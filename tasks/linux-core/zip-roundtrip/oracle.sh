cd "$HOME/zipme" && zip -q "$HOME/archive.zip" a.txt b.txt c.txt
