# GIMP itself, in batch mode: a new 256x256 image, filled red, exported.
out="$HOME/Pictures/red.png"
gimp -i -d -f -b "(let* ((image (car (gimp-image-new 256 256 RGB)))
                         (layer (car (gimp-layer-new image 256 256 RGB-IMAGE \"red\" 100 LAYER-MODE-NORMAL))))
                    (gimp-image-insert-layer image layer 0 0)
                    (gimp-context-set-foreground '(255 0 0))
                    (gimp-drawable-fill layer FILL-FOREGROUND)
                    (file-png-save-defaults RUN-NONINTERACTIVE image layer \"$out\" \"$out\"))" \
     -b "(gimp-quit 0)" >/dev/null 2>&1
test -f "$out"
