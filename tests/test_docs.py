"""The manual: README short with its two commands up front, generated lists current, every link alive, the site
building with --strict."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
README_LIMIT = 10_000
FIRST_COMMANDS = ["bash scripts/start.sh", "bash scripts/test.sh"]

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def gen_docs() -> ModuleType:
    """scripts/gen_docs.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("gen_docs_script", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_lists_match_the_registries() -> None:
    stale = gen_docs().stale(DOCS)
    assert not stale, "\n".join(stale)


def test_check_names_the_stale_page_and_a_rewrite_fixes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = gen_docs()
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs, ignore=shutil.ignore_patterns("screenshots"))
    begin = "\n<!-- BEGIN GENERATED: methods -->\n"
    page = next(p for p in sorted(docs.glob("*.md")) if begin in p.read_text())
    text = page.read_text()
    page.write_text(text.replace(begin, begin + "| `gone` |\n"))

    assert module.main(["--check", "--docs", str(docs)]) == 1
    assert f"docs/{page.name}" in capsys.readouterr().err
    assert module.main(["--docs", str(docs)]) == 0
    assert page.read_text() == text
    assert module.main(["--check", "--docs", str(docs)]) == 0


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text) < README_LIMIT, f"README.md has {len(text):,} characters; keep it under {README_LIMIT:,}"
    first = FENCE.search(text)
    assert first is not None, "README.md has no code block"
    lines = [line.split("#", 1)[0].strip() for line in first.group(0).splitlines()[1:-1]]
    assert [line for line in lines if line] == FIRST_COMMANDS


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) and GitHub give a heading, for the headings these pages use."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))}


def links(page: Path) -> list[str]:
    """Targets of the page's Markdown links and images, outside code."""
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return LINK.findall(text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_images_point_at_files(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        path = path.split("?", 1)[0]
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: {file.name} has no heading with anchor #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_screenshot_is_shown_somewhere() -> None:
    shown = {Path(t).name for page in PAGES for t in links(page)}
    unused = sorted(p.name for p in (DOCS / "screenshots").glob("*.png") if p.name not in shown)
    assert not unused, f"screenshots no page links to: {', '.join(unused)}"


def test_site_builds_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").exists()
