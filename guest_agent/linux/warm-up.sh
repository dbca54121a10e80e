# cu-run: runs as root
# shellcheck shell=sh
# Right after a restore, TCG has translated none of the guest's code: the first staging and the
# first listing of an episode cost ~0.9 s more than later ones (measured). This runs each once, on
# nothing, through the admin channel before the episode begins (runner.vm.episode), their output
# dropped.
#
# Parameters:
#   CU_RUN_STAGED   a staged run's program text (staged-run.sh, its parameters in front)
#   CU_RUN_LISTING  a listing's program text (the lister's command line)
: "${CU_RUN_STAGED?}"
: "${CU_RUN_LISTING?}"

( eval "$CU_RUN_STAGED" ) >/dev/null
( eval "$CU_RUN_LISTING" ) >/dev/null
