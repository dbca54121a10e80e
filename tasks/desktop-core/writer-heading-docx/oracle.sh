# The document as Writer saves it with the first paragraph in Heading 1.
python3 -I "$TASK_DIR/docx.py" write "$HOME/Documents/report.docx" heading
