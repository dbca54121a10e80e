"""The slides of an .odp and their titles, and a one-slide .odp as Impress saves it: what the
verifier reads and the oracle writes (stdlib only: the guest's python3)."""

import sys
import zipfile
from xml.etree import ElementTree as ET

NS = {"draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
      "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
      "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
      "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0"}


def titles(path):
    with zipfile.ZipFile(path) as z:
        if z.getinfo("content.xml").file_size > 50 * 2**20:
            raise ValueError("content.xml is over 50 MiB")
        root = ET.fromstring(z.read("content.xml"))
    found = []
    for page in root.iter(f"{{{NS['draw']}}}page"):
        title = ""
        for frame in page.iter(f"{{{NS['draw']}}}frame"):
            if frame.get(f"{{{NS['presentation']}}}class") == "title":
                title = " ".join("".join(p.itertext()) for p in frame.iter(f"{{{NS['text']}}}p")).strip()
        found.append(title)
    return found


MANIFEST = """<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">
 <manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.presentation"/>
 <manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
</manifest:manifest>"""
CONTENT = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="{office}" xmlns:draw="{draw}" xmlns:presentation="{presentation}"
  xmlns:text="{text}" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.3">
 <office:body><office:presentation><draw:page draw:name="Slide1">
  <draw:frame presentation:class="title" svg:x="2cm" svg:y="1cm" svg:width="24cm" svg:height="3cm">
   <draw:text-box><text:p>{title}</text:p></draw:text-box>
  </draw:frame>
 </draw:page></office:presentation></office:body>
</office:document-content>"""


def write(path, title):
    """A presentation of one slide titled TITLE: the mimetype first and stored, as ODF requires."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.presentation",
                   compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/manifest.xml", MANIFEST)
        z.writestr("content.xml", CONTENT.format(title=title, **NS))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
        sys.exit(0)
    try:
        found = titles(sys.argv[1])
    except (zipfile.BadZipFile, ET.ParseError, OSError, KeyError, ValueError) as exc:
        print(f"not a readable presentation: {exc}")
        sys.exit(0)
    if len(found) != 1:
        print(f"it has {len(found)} slides, not one")
    elif found[0] != "Launch plan":
        print(f"its slide's title is '{found[0]}', not 'Launch plan'")
    else:
        print("one slide")
