"""The files ``logist serve`` ships to the browser: the report's style and
script and the server's own, each under a name made from its content.

A page links ``/assets/serve.3f2a9c1b0d4e.js``, not ``/assets/serve.js``:
a new release's file has a new name, so a browser may keep each one for a
year without asking again (``Cache-Control: public, max-age=31536000,
immutable``) and never runs an old script against a new page. The plain
names are still served, uncached, for what linked them before. The texts
are read from the package once per process.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Optional

from ..views.html import asset

#: Each file a page may link, and the package whose assets/ holds it.
FILES = {"report.css": "logist.views", "report.js": "logist.views",
         "serve.css": "logist.serve", "serve.js": "logist.serve"}
#: A named-by-content file never changes: a browser keeps it a year.
IMMUTABLE = "public, max-age=31536000, immutable"


@lru_cache(maxsize=None)
def text(name: str) -> str:
    return asset(name, FILES[name])


@lru_cache(maxsize=None)
def hashed(name: str) -> str:
    """``name`` with the first 12 hex digits of its content's sha256 before its extension."""
    stem, _, ext = name.rpartition(".")
    return f"{stem}.{hashlib.sha256(text(name).encode()).hexdigest()[:12]}.{ext}"


def url(name: str) -> str:
    """The address a page links ``name`` at."""
    return "/assets/" + hashed(name)


def find(requested: str) -> Optional[tuple[str, bool]]:
    """The file ``/assets/REQUESTED`` is, and whether it was asked for by
    its content's name (cacheable for good); None: no such file."""
    if requested in FILES:
        return requested, False
    for name in FILES:
        if requested == hashed(name):
            return name, True
    return None


def media_type(name: str) -> str:
    return ("text/css" if name.endswith(".css") else "text/javascript") + "; charset=utf-8"
