"""A minimal .xlsx of one sheet, and its cells read back: what setup writes, the oracle writes
the answer into, and the verifier reads (stdlib only: the guest's python3)."""

import re
import sys
import zipfile
from xml.etree import ElementTree as ET

NS = {"s": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}
PARTS = {
    "[Content_Types].xml": (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
        '</Types>'
    ),
    "_rels/.rels": (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/>'
        '</Relationships>'
    ),
    "xl/workbook.xml": (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        '<sheets><sheet name="Sales" sheetId="1" r:id="rId1"/></sheets></workbook>'
    ),
    "xl/_rels/workbook.xml.rels": (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/>'
        '</Relationships>'
    ),
}
ROWS = [("Month", "Sales"), ("January", 10), ("February", 20), ("March", 30)]


def cell(ref, value, formula=None):
    if formula is not None:
        return f'<c r="{ref}"><f>{formula}</f><v>{value}</v></c>'
    if isinstance(value, str):
        return f'<c r="{ref}" t="inlineStr"><is><t>{value}</t></is></c>'
    return f'<c r="{ref}"><v>{value}</v></c>'


def write(path, with_sum=False):
    rows = [f'<row r="{n}">{cell(f"A{n}", a)}{cell(f"B{n}", b)}</row>' for n, (a, b) in enumerate(ROWS, 1)]
    if with_sum:
        rows.append(f'<row r="5">{cell("B5", 60, "SUM(B2:B4)")}</row>')
    sheet = ('<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
             f'spreadsheetml/2006/main"><sheetData>{"".join(rows)}</sheetData></worksheet>')
    with zipfile.ZipFile(path, "w") as z:
        for name, text in {**PARTS, "xl/worksheets/sheet1.xml": sheet}.items():
            z.writestr(name, text)


def b5(path):
    """Cell B5 of the first sheet as (formula, value), or why it cannot be read."""
    with zipfile.ZipFile(path) as z:
        names = sorted(n for n in z.namelist() if re.fullmatch(r"xl/worksheets/sheet\d+\.xml", n))
        if not names:
            return None, "the file has no worksheet"
        if z.getinfo(names[0]).file_size > 50 * 2**20:
            return None, "the worksheet is over 50 MiB"
        root = ET.fromstring(z.read(names[0]))
    for c in root.iter(f"{{{NS['s']}}}c"):
        if c.get("r") == "B5":
            f, v = c.find("s:f", NS), c.find("s:v", NS)
            return (f.text if f is not None else None, v.text if v is not None else None), ""
    return None, "cell B5 is empty"


if __name__ == "__main__":
    command, path = sys.argv[1], sys.argv[2]
    if command == "write":
        write(path, with_sum=len(sys.argv) > 3)
    else:
        try:
            found, why = b5(path)
        except (zipfile.BadZipFile, ET.ParseError, OSError, KeyError) as exc:
            print(f"not a readable .xlsx: {exc}")
            sys.exit(0)
        if found is None:
            print(why)
        else:
            formula, value = found
            print(f"formula={formula or ''} value={value or ''}")
