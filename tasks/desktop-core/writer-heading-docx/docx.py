"""A minimal .docx of two paragraphs, and its paragraphs' styles read back: what setup writes,
the oracle restyles, and the verifier reads (stdlib only: the guest's python3)."""

import sys
import zipfile
from xml.etree import ElementTree as ET

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
PARAGRAPHS = ["Quarterly report", "Sales grew in every month of the quarter."]
PARTS = {
    "[Content_Types].xml": (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
        '<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>'
        '</Types>'
    ),
    "_rels/.rels": (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>'
        '</Relationships>'
    ),
    "word/_rels/document.xml.rels": (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>'
        '</Relationships>'
    ),
    "word/styles.xml": f'<?xml version="1.0" encoding="UTF-8"?><w:styles xmlns:w="{W}"><w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style><w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/><w:basedOn w:val="Normal"/><w:pPr><w:outlineLvl w:val="0"/></w:pPr><w:rPr><w:b/><w:sz w:val="32"/></w:rPr></w:style></w:styles>',
}


def write(path, heading=False):
    body = []
    for number, text in enumerate(PARAGRAPHS):
        style = '<w:pPr><w:pStyle w:val="Heading1"/></w:pPr>' if heading and number == 0 else ""
        body.append(f"<w:p>{style}<w:r><w:t>{text}</w:t></w:r></w:p>")
    document = f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W}"><w:body>{"".join(body)}</w:body></w:document>'
    with zipfile.ZipFile(path, "w") as z:
        for name, text in {**PARTS, "word/document.xml": document}.items():
            z.writestr(name, text)


def paragraphs(path):
    """(style id, style name, text) of each paragraph."""
    with zipfile.ZipFile(path) as z:
        for name in ("word/document.xml", "word/styles.xml"):
            if z.getinfo(name).file_size > 50 * 2**20:
                raise ValueError(f"{name} is over 50 MiB")
        root = ET.fromstring(z.read("word/document.xml"))
        styles = ET.fromstring(z.read("word/styles.xml")) if "word/styles.xml" in z.namelist() else None
    names = {}
    if styles is not None:
        for style in styles.iter(f"{{{W}}}style"):
            name = style.find(f"{{{W}}}name")
            names[style.get(f"{{{W}}}styleId")] = name.get(f"{{{W}}}val") if name is not None else ""
    found = []
    for p in root.iter(f"{{{W}}}p"):
        text = "".join(t.text or "" for t in p.iter(f"{{{W}}}t"))
        if not text.strip():
            continue
        style = p.find(f"{{{W}}}pPr/{{{W}}}pStyle")
        sid = style.get(f"{{{W}}}val") if style is not None else ""
        found.append((sid, names.get(sid, ""), text))
    return found


if __name__ == "__main__":
    command, path = sys.argv[1], sys.argv[2]
    if command == "write":
        write(path, heading=len(sys.argv) > 3)
        sys.exit(0)
    try:
        found = paragraphs(path)
    except (zipfile.BadZipFile, ET.ParseError, OSError, KeyError, ValueError) as exc:
        print(f"not a readable .docx: {exc}")
        sys.exit(0)
    if not found:
        print("the document has no text")
    elif found[0][2].strip() != PARAGRAPHS[0]:
        print(f"its first paragraph is no longer 'Quarterly report' ({len(found)} paragraphs)")
    elif found[0][0].replace(" ", "").lower() != "heading1" and found[0][1].lower() != "heading 1":
        print(f"its first paragraph has the style '{found[0][1] or found[0][0] or 'none'}', not Heading 1")
    elif not any(PARAGRAPHS[1] in text for _sid, _name, text in found[1:]):
        print("its second paragraph is gone")
    else:
        print("heading")
