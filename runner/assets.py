"""The asset store: the files a benchmark's tasks download (inputs, gold files), fetched once on a
connected machine and kept by content, so runs are offline and check what they use.

    <assets>/blobs/sha256/<hex>     each file, named by its sha256
    <assets>/index.json             {"assets": [{url, sha256, size, fetched_at, fetched_from}]}

`cu-run assets fetch --suite S --assets DIR [--mirror URL]` downloads every URL the suite's
tasks reference. A Hugging Face `resolve/main/` URL is fetched at the revision `main` points to
then, and that revision is recorded: the same index gives the same bytes later. Runs read the
store (--assets DIR or CU_RUN_ASSETS), check each blob's sha256, and name every missing one with
the command that fetches it.

Which URLs a benchmark's task needs is runner.benchmarks.task_assets's to say.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from runner.errors import UsageError

INDEX = "index.json"
ASSETS_ENV = "CU_RUN_ASSETS"
_HF_RESOLVE = re.compile(r"^/(?P<kind>datasets/|spaces/)?(?P<repo>[^/]+/[^/]+)/resolve/main/(?P<path>.+)$")
TIMEOUT_S = 120


class AssetStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def index_path(self) -> Path:
        return self.root / INDEX

    def index(self) -> dict[str, dict[str, Any]]:
        """{url: entry}; empty for a store with no index yet."""
        if not self.index_path.is_file():
            return {}
        try:
            data = json.loads(self.index_path.read_text())
            return {str(e["url"]): e for e in data["assets"]}
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{self.index_path} is not an asset index ({exc})",
                             fix="fetch the assets again into a new folder: cu-run assets fetch") from None

    def blob(self, sha256: str) -> Path:
        return self.root / "blobs" / "sha256" / sha256

    def resolve(self, urls: tuple[str, ...] | list[str], verify: bool = True) -> tuple[dict[str, Path], list[str]]:
        """({url: blob path}, problems): each URL's blob, its sha256 checked when VERIFY; a problem
        names each URL that is not in the store, or whose blob is missing or altered."""
        index = self.index()
        found, problems = {}, []
        for url in urls:
            entry = index.get(url)
            if entry is None:
                problems.append(f"{url}: not in the asset store {self.root}")
                continue
            blob, problem = self.checked_blob(str(entry["sha256"]), verify)
            if problem:
                problems.append(f"{url}: {problem}")
                continue
            found[url] = blob
        return found, problems

    def checked_blob(self, sha256: str, verify: bool = True) -> tuple[Path, str | None]:
        """The blob named SHA256, and what is wrong with it: missing, or (when VERIFY) not matching
        its name."""
        blob = self.blob(sha256)
        if not blob.is_file():
            return blob, f"its blob {blob} is missing"
        if verify and sha256_file(blob) != sha256:
            return blob, f"its blob {blob} does not match its sha256 (altered or truncated)"
        return blob, None

    def keep(self, data: bytes, key: str, source: str) -> str:
        """DATA kept by its sha256 under KEY (in place of a URL: what it is, e.g. cassette:SUITE/TASK),
        SOURCE saying where it came from; returns the sha256."""
        digest = hashlib.sha256(data).hexdigest()
        (self.root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=self.root / "blobs", prefix=".partial-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(partial, self.blob(digest))
        index = self.index()
        index[key] = {"url": key, "sha256": digest, "size": len(data), "fetched_at": datetime.now(UTC).isoformat(),
                      "fetched_from": source}
        self._write_index(index)
        return digest

    def fetch(self, urls: list[str], mirror: str | None = None, say: Callable[[str], None] = lambda _m: None,
              opener: Callable[[str], Any] | None = None) -> tuple[int, list[str]]:
        """Downloads each URL not yet in the store; returns (fetched, failures). The index is
        rewritten after every file, so an interrupted fetch keeps what it got."""
        index = self.index()
        todo = [u for u in dict.fromkeys(urls) if u not in index or not self.blob(index[u]["sha256"]).is_file()]
        revisions: dict[str, str | None] = {}
        failures, fetched = [], 0
        (self.root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        for number, url in enumerate(todo, 1):
            source = _pinned(url, mirror, revisions, opener or _open)
            say(f"[{number}/{len(todo)}] {source}")
            try:
                digest, size = self._download(source, opener or _open)
            except (OSError, urllib.error.URLError, ValueError) as exc:
                failures.append(f"{url}: {exc}")
                continue
            index[url] = {"url": url, "sha256": digest, "size": size, "fetched_at": datetime.now(UTC).isoformat(),
                          "fetched_from": source}
            self._write_index(index)
            fetched += 1
        return fetched, failures

    def _download(self, source: str, opener: Callable[[str], Any]) -> tuple[str, int]:
        digest, size = hashlib.sha256(), 0
        handle, partial = tempfile.mkstemp(dir=self.root / "blobs", prefix=".partial-")
        try:
            with os.fdopen(handle, "wb") as out, opener(source) as response:
                while chunk := response.read(2**20):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            final = self.blob(digest.hexdigest())
            os.replace(partial, final)
            return digest.hexdigest(), size
        finally:
            if os.path.exists(partial):
                os.unlink(partial)

    def _write_index(self, index: dict[str, dict[str, Any]]) -> None:
        entries = [index[u] for u in sorted(index)]
        tmp = self.index_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"assets": entries}, indent=1) + "\n")
        tmp.replace(self.index_path)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(2**20):
            digest.update(chunk)
    return digest.hexdigest()


def _open(url: str):
    request = urllib.request.Request(_quoted(url), headers={"User-Agent": "cu-run assets fetch"})
    return urllib.request.urlopen(request, timeout=TIMEOUT_S)  # http(s) URLs of the suite's tasks


def _quoted(url: str) -> str:
    """URL with its path and query percent-encoded: upstream's task files name files in Chinese
    and with spaces, which HTTP cannot carry as they are (an escape already there is kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=quote(parts.path, safe="/%:@!$&'()*+,;="),
                                     query=quote(parts.query, safe="/%:@!$&'()*+,;=?")))


def _mirrored(url: str, mirror: str | None) -> str:
    """URL on MIRROR: its scheme and host replaced (a Hugging Face mirror, a lab's proxy)."""
    if not mirror:
        return url
    base, parts = urlsplit(mirror), urlsplit(url)
    path = base.path.rstrip("/") + parts.path
    return urlunsplit((base.scheme, base.netloc, path, parts.query, ""))


def _pinned(url: str, mirror: str | None, revisions: dict[str, str | None], opener: Callable[[str], Any]) -> str:
    """Where to fetch URL from: on MIRROR, and for a Hugging Face resolve/main URL at the commit
    `main` is at now (asked once per repository), so the index records a fixed revision."""
    parts = urlsplit(url)
    found = _HF_RESOLVE.match(parts.path) if parts.hostname == "huggingface.co" else None
    if found is None:
        return _mirrored(url, mirror)
    repo_key = f"{found['kind'] or 'models/'}{found['repo']}"
    if repo_key not in revisions:
        api = _mirrored(f"https://huggingface.co/api/{repo_key}/revision/main", mirror)
        try:
            with opener(api) as response:
                revisions[repo_key] = str(json.loads(response.read())["sha"])
        except (OSError, urllib.error.URLError, ValueError, KeyError, TypeError):
            revisions[repo_key] = None  # no API (a plain mirror): fetched at main, recorded as fetched
    revision = revisions[repo_key]
    if revision is None:
        return _mirrored(url, mirror)
    pinned = parts._replace(path=parts.path.replace("/resolve/main/", f"/resolve/{revision}/", 1))
    return _mirrored(urlunsplit(pinned), mirror)


def assets_root(given: Path | None) -> Path | None:
    if given is not None:
        return given.expanduser().resolve()
    env = os.environ.get(ASSETS_ENV)
    return Path(env).expanduser().resolve() if env else None


def missing_fix(suite: str) -> str:
    return (f"on a connected machine: cu-run assets fetch --suite {suite} --assets DIR; "
            f"then pass --assets DIR (or set {ASSETS_ENV})")
