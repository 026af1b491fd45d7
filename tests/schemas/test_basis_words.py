"""A flag verdict's basis is said one way (schemas/vocab.py ``BASIS_WORDS``): docs/views.md and the
MCP ``flag_verdicts`` tool listed researched / measured / log, never ``source``, the basis every
verdict ``tuneledger research --record`` writes has."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from schemas.vocab import BASIS_WORDS, VerdictBasis, basis_text
from tests.support.cli_inprocess import invoke

VIEWS_DOC = Path(__file__).parents[2] / "docs" / "views.md"


def test_every_basis_has_its_words_in_the_views_doc() -> None:
    assert set(BASIS_WORDS) == set(get_args(VerdictBasis))
    row = next(
        line for line in VIEWS_DOC.read_text().splitlines() if line.startswith("| `flag_verdicts`")
    )
    assert f"**basis** ({basis_text()})" in row
    assert "source (tuneledger research read the engine's source)" in basis_text()


def test_the_mcp_flag_verdicts_tool_names_every_basis(tmp_path: Path) -> None:
    out = invoke(["--ledger", tmp_path / "m.duckdb", "mcp", "--list-tools"])
    assert out.returncode == 0, out.stderr
    assert "basis (researched / source / measured / log)" in out.stdout
    assert basis_text(words=False) == "researched / source / measured / log"
