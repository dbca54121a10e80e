# The files of this task, shared by setup and verify: the real config and its decoys.
# Sourced by setup and verify, which run as the admin: $USER_HOME is the desktop user's home.
svc="$USER_HOME/service"
real="$svc/conf.d/app.conf"
decoys="$svc/conf.d/app.conf.bak $svc/app.conf.example $svc/old/app.conf $USER_HOME/backup/app.conf"
broken_config() {
    printf '# app configuration\nname = inventory\nhost = 127.0.0.1\nport = 80800\nworkers = 4\n'
}
fixed_config() {
    broken_config | sed 's/^port = 80800$/port = 8080/'
}
