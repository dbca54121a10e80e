# The presentation as Impress saves it: one slide, its title placeholder holding the title.
python3 -I "$TASK_DIR/slides.py" write "$HOME/Documents/pitch.odp" "Launch plan"
