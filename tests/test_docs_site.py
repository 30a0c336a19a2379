"""The docs site builds with MkDocs in strict mode, without a warning, so it cannot rot.

``mkdocs.yml`` lists every page of ``docs/`` in its nav and generates the API reference
(``docs/api/``) from the docstrings with mkdocstrings. The examples on the pages run in
``tests/test_docs.py``; this builds the site around them. Building is the same in both
passes of the suite, so it runs in the compiled one only.
"""

from __future__ import annotations

import html
import inspect
import pathlib
import re
import subprocess
import sys
from typing import Iterator, List

import pytest

pytestmark = pytest.mark.compiled_pass

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    # The docs extra has all the build needs; the test extra includes it.
    pytest.importorskip("mkdocs", reason="the docs site needs mkdocs (pip install -e '.[docs]')")
    pytest.importorskip("mkdocstrings_handlers.python",
                        reason="the API reference needs mkdocstrings[python] (pip install -e '.[docs]')")
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(CONFIG), "--site-dir", str(site_dir)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
    )
    assert result.returncode == 0, "mkdocs build --strict failed:\n%s" % result.stdout
    warnings = [line for line in result.stdout.splitlines() if "WARNING" in line or "ERROR" in line]
    assert not warnings, "mkdocs build warned:\n%s" % "\n".join(warnings)
    return site_dir


def _text(page: pathlib.Path) -> str:
    """A built page's text: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.read_text())).split())


def _nav_pages(nav: object) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_pages(value)


def test_site_builds_with_api_reference(site: pathlib.Path) -> None:
    from pylogq.client.producer import Producer

    clients = site / "api" / "clients" / "index.html"
    assert clients.exists()
    summary = " ".join(inspect.getdoc(Producer.send).splitlines()[0].split())  # type: ignore[union-attr]
    assert summary in _text(clients)
    assert 'id="pylogq.Producer.send"' in clients.read_text()
    for page in sorted((DOCS / "api").glob("*.md")):
        built = site / "api" / ("" if page.stem == "index" else page.stem) / "index.html"
        assert built.exists(), "%s was not built" % page.relative_to(ROOT)


def test_no_page_shows_rest_literal_markup(site: pathlib.Path) -> None:
    # ``literal`` renders as code in prose, but a docstring's indented block is a Markdown
    # code block, where the backticks would show as typed.
    shown = sorted(str(page.relative_to(site)) for page in site.rglob("*.html") if "``" in _text(page))
    assert not shown, "pages showing reST's ``literal`` markup as typed: %s" % ", ".join(shown)


def test_every_page_is_in_the_nav() -> None:
    yaml = pytest.importorskip("yaml", reason="reading mkdocs.yml needs PyYAML (installed with mkdocs)")
    nav = set(_nav_pages(yaml.safe_load(CONFIG.read_text())["nav"]))
    pages: List[str] = sorted(str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md")
                              if not any(part.startswith("_") for part in page.relative_to(DOCS).parts))
    missing = [page for page in pages if page not in nav]
    assert not missing, "pages of docs/ missing from the nav of mkdocs.yml: %s" % ", ".join(missing)
    assert "index.md" in nav and "api/index.md" in nav
