sed -i 's/^port = 80800$/port = 8080/' "$HOME/service/conf.d/app.conf"
