. "$TASK_DIR/oracle_lib.sh"
# Tools > Options > Load/Save > General: AutoRecovery every 3 minutes, as LibreOffice records it
quit soffice.bin
f="$HOME/.config/libreoffice/4/user/registrymodifications.xcu"
item='<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>3</value></prop></item>'
sed -i '/AutoSaveTimeIntervall/d' "$f"
sed -i "s|</oor:items>|$item\n</oor:items>|" "$f"
