# cu-run: runs as root
# shellcheck shell=sh
# Two admin programs in one guest command (runner.profiles.listing: step_then_list): FIRST (the
# quarantine, or the home's hand-over) in a subshell, so that an `exit` in it ends only its part;
# if it succeeded, BOUNDARY on a line of its own, then SECOND (the write-set listing), whose exit
# code is the command's; FIRST's when it failed. Through the admin channel.
#
# Parameters:
#   CU_RUN_FIRST     a program's text (the runner's own, from a file beside this one)
#   CU_RUN_BOUNDARY  a line that parts their output, which nothing in the guest can know
#   CU_RUN_SECOND    a program's text (the runner's own)
: "${CU_RUN_FIRST?}"
: "${CU_RUN_BOUNDARY?}"
: "${CU_RUN_SECOND?}"

( eval "$CU_RUN_FIRST" )
q=$?; [ $q -eq 0 ] || exit $q
echo "$CU_RUN_BOUNDARY"
eval "$CU_RUN_SECOND"
