"""The repository speaks of the project, not of how its work was organized.

Code, comments, specs and documentation give dates or topics, never numbered work periods,
issue numbers or commit hashes: those mean nothing to a reader of a clone (a commit hash may not
even exist in it once history is rewritten). This test reads the text files under ``src/``,
``docs/``, ``results/`` and ``tests/`` and the top-level documents, and names each offending line. JSON and
other measured artifacts are left alone: their hex digests and checksums are data.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED_DIRS = ("src", "docs", "results", "tests")
SCANNED_FILES = ("README.md", "CITATION.cff", "Makefile", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".cff", ".txt", ".cfg"}

# Each pattern with what it stands for, as the failure message names it.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a numbered work period", re.compile(r"\bsessions?\s+\d+", re.IGNORECASE)),
    ("an issue number", re.compile(r"\bissues?[\s-]*(?:#|no\.?\s*)?\d+", re.IGNORECASE)),
    ("a pull-request number", re.compile(r"\b(?:PR|pull request)\s*#\d+", re.IGNORECASE)),
    # 7 to 40 hex digits with at least one digit and one letter, so that words ("defaced")
    # and plain numbers pass.
    ("a commit hash", re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")),
)
COMMIT_HASH = PATTERNS[-1][0]
# A line that speaks of a model hash, a digest or a checksum holds hex as data (a contract's
# robot.model_hash in a test), unless it also speaks of a commit.
HEX_AS_DATA = re.compile(r"hash|sha\d*|digest|checksum", re.IGNORECASE)
COMMIT = re.compile(r"\bcommit", re.IGNORECASE)


def _text_files() -> list[Path]:
    files = [ROOT / name for name in SCANNED_FILES if (ROOT / name).is_file()]
    for folder in SCANNED_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    return files


def _offences(text: str) -> list[tuple[int, str, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        hex_is_data = HEX_AS_DATA.search(line) is not None and COMMIT.search(line) is None
        for what, pattern in PATTERNS:
            if what == COMMIT_HASH and hex_is_data:
                continue
            match = pattern.search(line)
            if match:
                found.append((number, what, match.group(0)))
    return found


def test_patterns_catch_what_they_should_and_nothing_else():
    # Spelled in pieces so that this file passes its own scan.
    caught = (
        "see sess" + "ion 18",
        "Sess" + "ions 19-20",
        "(iss" + "ue 22)",
        "iss" + "ue-22 targets",
        "Iss" + "ue #3",
        "commit b9d" + "ec07",
        "P" + "R #12",
        "9e3d6" + "1f00aa",
        "ab" + "b5fb4",
        "the commit hash 9e3" + "d61f",
    )
    for text in caught:
        assert _offences(text), text
    passed = (
        "the sessions of training",
        "an issue with the contact",
        "1234567 steps",
        "defaced",
        "a decade",
        "seed 0",
        "0x7fffffff",
        "iteration 200",
        "2026-12-05",
        "policy.onnx",
        "sha256",
        'model_hash="0123456789abcdef"',
    )
    for text in passed:
        assert not _offences(text), text


def test_no_work_period_issue_or_commit_references():
    offences = []
    for path in _text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, what, matched in _offences(text):
            offences.append(f"{path.relative_to(ROOT)}:{number}: {what} ({matched!r})")
    assert not offences, "the repository should speak of the project only:\n" + "\n".join(offences)


@pytest.mark.parametrize("path", sorted((ROOT / "results").rglob("*.json")), ids=lambda p: str(p.relative_to(ROOT)))
def test_result_files_are_valid_json(path):
    json.loads(path.read_text(encoding="utf-8"))


def _relative_links(text: str) -> list[str]:
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    return [link for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]


@pytest.mark.parametrize(
    "path",
    [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "results").rglob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_relative_links_in_documents_exist(path):
    missing = []
    for link in _relative_links(path.read_text(encoding="utf-8")):
        target = (path.parent / link.split("#", 1)[0]).resolve()
        if not target.exists():
            missing.append(link)
        elif ROOT not in target.parents and target != ROOT:
            missing.append(f"{link} (outside the repository)")
    assert not missing, f"{path.relative_to(ROOT)} links to missing files: {missing}"


def test_measured_artifacts_live_under_results():
    """docs/ is prose; the measured files it cites (JSON, CSV, evaluation tables) live in results/."""
    artifacts = [p.relative_to(ROOT) for p in (ROOT / "docs").rglob("*") if p.suffix in {".json", ".csv", ".npz"}]
    assert not artifacts, f"measured files belong under results/, not docs/: {artifacts}"
