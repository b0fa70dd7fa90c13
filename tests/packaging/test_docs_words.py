"""The docs and the README describe the product as it is: no sentence tells how it was or is "now" ("now", "no
longer", "any more", "as before", "than before"). Measurements are dated records that name what they compare ("before"
= a named commit, a column of a table); those are not narrative and pass. Commands and code (fenced blocks, inline
code) are not sentences and are left out. The check itself is shown finding each form."""

from __future__ import annotations

import re

import pytest

from odcore.paths import REPO_ROOT

# Each pattern may span a line break: a sentence in Markdown runs over several lines.
NARRATIVE = (
    re.compile(r"\bnow\b", re.I),
    re.compile(r"\bno\s+longer\b", re.I),
    re.compile(r"\bany\s?more\b(?=\s*[.,;:)]|\s*$)", re.I),            # "... any more." (not "any more than")
    re.compile(r"\b(?:as|than)\s+(?:(?:it|they|this|that)\s+)?(?:(?:did|was|were|had)\s+)?before\b(?!\s*[=(])", re.I),
)
# Quoted outside text that may say "now" (a paper's or a tool's own words): (file, the quoted words). None so far.
QUOTED: set[tuple[str, str]] = set()

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def _blank(m: re.Match) -> str:
    """The match with every character but line breaks turned into a space (line numbers stay right)."""
    return re.sub(r"[^\n]", " ", m.group(0))


def narrative_sentences(text: str, name: str = "") -> list[str]:
    """``"line: words"`` for each narrative form in the Markdown ``text``, code left out."""
    prose = INLINE_CODE.sub(_blank, FENCE.sub(_blank, text))
    found = []
    for pat in NARRATIVE:
        for m in pat.finditer(prose):
            if (name, m.group(0)) in QUOTED:
                continue
            line = prose.count("\n", 0, m.start()) + 1
            found.append(f"{name}:{line}: {' '.join(text.splitlines()[line - 1].split())[:120]}")
    return found


DOCS = sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")])


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_narrative_sentence_in_the_docs(path):
    name = str(path.relative_to(REPO_ROOT))
    found = narrative_sentences(path.read_text(encoding="utf-8"), name)
    assert not found, "narrative sentences (say what the product does, or date a record):\n" + "\n".join(found)


def test_docs_are_found():
    assert REPO_ROOT / "README.md" in DOCS
    assert len(DOCS) > 10


@pytest.mark.parametrize("sentence", [
    "The command now runs it as its own row.",
    "Now the page opens faster.",
    "pandas 3\nno longer has it.",
    "The sidebar holds no slider any more.",
    "Other addresses are served as before: one address holds at most 150.",
    "It sends 41 kB more than before.",
    "The zones cost most of the draw, as they did before.",
])
def test_the_check_finds_each_form(sentence):
    assert narrative_sentences(sentence)


@pytest.mark.parametrize("sentence", [
    "Checked before any work is done.",
    '"before" = commit 920c65c, "after" = the commit in each row.',
    "| page | before | after |",
    "It does not cost any more memory than one table.",
    "A known one before their first record.",
    "Run `python -m benchmarks.map_layers now.json` on both.",
    "```\nnow = datetime.now()\n```",
    "Snow and knowledge are not the word.",
])
def test_the_check_leaves_records_and_code_alone(sentence):
    assert narrative_sentences(sentence) == []
