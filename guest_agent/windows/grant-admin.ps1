# cu-run: runs as the verifier account
# For a task with agent_privileges: admin (runner.tasks.scripts: grant_admin): the desktop user
# joins the local Administrators group for this episode, whose overlay is discarded after it.
# Already a member is no error.
#
# Parameters:
#   UserName  the desktop user's account name
param(
    [string]$UserName = ''
)
# By the group's SID, not its name: the name is the display language's.
Add-LocalGroupMember -SID 'S-1-5-32-544' -Member $UserName -ErrorAction SilentlyContinue
