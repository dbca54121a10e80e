# Login shells read ~/.profile first (bash skips it when this file exists).
[ -f ~/.profile ] && . ~/.profile
# Autologin on tty1 goes straight to the desktop.
if [ -z "$DISPLAY" ] && [ "$(tty)" = /dev/tty1 ]; then
    exec startx -- -nolisten tcp vt1 >/tmp/xsession.log 2>&1
fi
