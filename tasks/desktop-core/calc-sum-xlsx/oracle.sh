# The file as Calc saves it with B5 = SUM(B2:B4): the formula and its value.
python3 -I "$TASK_DIR/xlsx.py" write "$HOME/Documents/sales.xlsx" with-sum
