"""Every relative link in the README and docs/ reaches a file of the repository."""

import re

import pytest

from runner.config import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_reach_a_file(page):
    broken = [target for target in LINK.findall(page.read_text())
              if "://" not in target and not target.startswith("mailto:") and not (page.parent / target).exists()]
    assert broken == [], f"{page.name}: {broken}"
