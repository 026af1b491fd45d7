"""No secret reaches the ledger or the export (docs/reliability.md).

End to end with real parts: the server runner starts the fake SGLang server (a real process
that prints ``api_key='…'`` in its server_args line, as SGLang does), the CLI imports a real
log and appends events, then every column of every table of the DuckDB file and the Markdown
export are searched for the secrets.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, get_args

import duckdb
import pytest
from pydantic import BaseModel

from ledger.store import LedgerStore
from runners.server.configs import parse_configs
from runners.server.engines import recorded_env
from runners.server.runner import ServerStartFailed
from schemas import EVENT_TYPES
from schemas.secrets import (
    add_secret_words,
    is_secret_name,
    mask_payload,
    mask_text,
    may_hold_secret,
)
from tests.support.cli_inprocess import invoke
from tests.support.fake_sglang import fake_config, make_runner

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "ledger.cli.main"]
SECRETS = (
    "sk-X-config-key",
    "sk-Z-log-key",
    "hunter2-admin",
    "Bearer-zzz",
    "ib-auth-secret",
    "sk-Q-note",
)


def stored_text(path: Path) -> str:
    """Every value of every column of every table in the ledger file, as text."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        parts = []
        for table in tables:
            parts.append(str(con.execute(f'SELECT * FROM "{table}"').fetchall()))
        return "\n".join(parts)
    finally:
        con.close()


@pytest.mark.parametrize(
    "name",
    [
        "api-key",
        "--api-key",
        "api_key",
        "apiKey",
        "OPENAI_API_KEY",
        "HF_TOKEN",
        "token",
        "SGLANG_ADMIN_PASS",
        "SGLANG_AUTH",
        "NCCL_IB_AUTH",
        "password",
        "db_passwd",
        "client-secret",
        "aws_secret_access_key",
        "credentials",
        "Authorization",
        "bearer",
        "private key",
        "ssh_private_key",
        "access_token",
        "authToken",
        "hf_token",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "max_total_tokens",
        "max-prefill-tokens",
        "tokenizer_path",
        "skip_tokenizer_init",
        "author",
        "passes",
        "keyboard",
        "CUDA_VISIBLE_DEVICES",
        "tp",
        "output_tokens",
        # benchmark tools' metric names (llmperf, GuideLLM): "token" mid-name is a unit
        "inter_token_latency_s_mean",
        "time_per_output_token_ms_mean",
        "mean_output_token_length",
        "request_output_throughput_token_per_s_p50",
    ],
)
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (
            "python -m sglang.launch_server --api-key sk-1 --tp 4",
            "python -m sglang.launch_server --api-key *** --tp 4",
        ),
        ("--api-key=sk-1", "--api-key=***"),
        (
            "server_args=ServerArgs(model_path='m', api_key='sk-1', max_total_tokens=5)",
            "server_args=ServerArgs(model_path='m', api_key='***', max_total_tokens=5)",
        ),
        (
            "server_args=ServerArgs(api_key=None, tp_size=4)",
            "server_args=ServerArgs(api_key=None, tp_size=4)",
        ),
        ('{"api_key": "sk-1", "token": null}', '{"api_key": "***", "token": null}'),
        ("Authorization: Bearer abcdefghijkl", "Authorization: ***"),
        (
            "curl -H 'Authorization: Bearer abcdefghijkl' http://x",
            "curl -H 'Authorization: ***' http://x",
        ),
        ("export HF_TOKEN=hf_abc", "export HF_TOKEN=***"),
        ('SGLANG_AUTH="Bearer x y"', 'SGLANG_AUTH="***"'),
        ("key in a note: sk-proj-abcdefghijklmnop1234", "key in a note: ***"),
        ("hf_abcdefghijklmnopqrstuvwx in a path", "*** in a path"),
        ("max_total_tokens=412345, #token: 70011", "max_total_tokens=412345, #token: 70011"),
        (
            "llmperf inter_token_latency = ttlt / output tokens",
            "llmperf inter_token_latency = ttlt / output tokens",
        ),
        # a hyphenated word in prose is no flag (a plan's hypothesis was stored as "*** cap")
        ("a 256-token batch cap", "a 256-token batch cap"),
        ("x --token abc -password def", "x --token *** -password ***"),
    ],
)
def test_mask_text(text: str, masked: str) -> None:
    assert mask_text(text) == masked


def test_other_tools_metrics_survive_import(tmp_path: Path) -> None:
    """llmperf's and GuideLLM's per-token metrics are numbers, not secrets: kept as imported."""
    from ledger.importers import import_file

    fixtures = Path(__file__).parents[1] / "fixtures" / "other_tools" / "shared" / "llmperf"
    summary = next(fixtures.glob("*summary.json"))
    store = LedgerStore(tmp_path / "l.duckdb")
    store.init()
    store.append(import_file(summary).events)
    stored = stored_text(store.path)
    assert "inter_token_latency" in stored and "'***'" not in stored and '"***"' not in stored


def test_mask_payload_flags_argv_env_and_nested_args() -> None:
    data = {
        "flags": {"api-key": "sk-1", "tp": 4, "enable-auth": True},
        "argv": ["python", "--api-key", "sk-1", "--token=abc", "--tp", "4"],
        "env": {"SGLANG_AUTH": "x", "NCCL_IB_AUTH": "y", "CUDA_VISIBLE_DEVICES": "0"},
        "startup": {"server_args": {"api_key": "sk-1", "admin_api_key": None, "tp_size": 4}},
        "log_tail": ["ok", "server_args=ServerArgs(api_key='sk-1')"],
    }
    assert mask_payload(data) == {
        "flags": {"api-key": "***", "tp": 4, "enable-auth": True},
        "argv": ["python", "--api-key", "***", "--token=***", "--tp", "4"],
        "env": {"CUDA_VISIBLE_DEVICES": "0"},
        "startup": {"server_args": {"api_key": "***", "admin_api_key": None, "tp_size": 4}},
        "log_tail": ["ok", "server_args=ServerArgs(api_key='***')"],
    }
    clean = {"metrics": {"output_tokens": 5}, "argv": ["--tp", "4"]}
    assert mask_payload(clean) is clean  # nothing to mask: no copy


def test_words_added_by_the_config_file_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    import schemas.secrets as secrets

    monkeypatch.setattr(secrets, "_WORDS", set(secrets._WORDS))
    monkeypatch.setattr(secrets, "_PAIRS", set(secrets._PAIRS))
    assert not is_secret_name("my-hmac") and not is_secret_name("signing_key")
    parse_configs(
        {
            "secret_words": ["hmac", "signing key"],
            "configs": {"a": {"engine": "sglang", "model": "m"}},
        }
    )
    assert is_secret_name("my-hmac") and is_secret_name("SIGNING_KEY")
    assert mask_text("--my-hmac abc") == "--my-hmac ***"
    with pytest.raises(ValueError):
        add_secret_words(["one two three"])
    secrets._roots = secrets._build_scan()
    monkeypatch.undo()
    secrets._roots = secrets._build_scan()


def test_no_event_field_name_is_a_secret_name() -> None:
    """Masking must never hide our own data: no field of any event model is a secret name."""

    def fields(model: type[BaseModel], seen: set[type]) -> list[str]:
        names = []
        for name, info in model.model_fields.items():
            names.append(name)
            for arg in (info.annotation, *get_args(info.annotation)):
                for inner in (arg, *get_args(arg)):
                    if (
                        isinstance(inner, type)
                        and issubclass(inner, BaseModel)
                        and inner not in seen
                    ):
                        seen.add(inner)
                        names += fields(inner, seen)
        return names

    names = {n for model in EVENT_TYPES.values() for n in fields(model, set())}
    assert [n for n in sorted(names) if is_secret_name(n)] == []


def test_the_gate_skips_a_benchmark_payload() -> None:
    payload = json.dumps(
        {"metrics": {"total_output_tokens": 1, "output_throughput": 2.0}, "tokenizer": "t"}
    )
    assert not may_hold_secret(payload)


def test_no_secret_in_any_stored_column_or_the_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "l.duckdb"
    store = LedgerStore(ledger)
    store.init()
    monkeypatch.setenv("SGLANG_ADMIN_PASS", "hunter2-admin")
    monkeypatch.setenv("SGLANG_AUTH", "Bearer Bearer-zzz")
    monkeypatch.setenv("NCCL_IB_AUTH", "ib-auth-secret")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    runner = make_runner(store)
    # the server runner: started, ready (server_args parsed from the log), stopped
    run = runner.start(fake_config("keyed", **{"api-key": "sk-X-config-key"}))
    runner.stop(run)
    # a crash: the log tail quotes the server_args line with the key
    with pytest.raises(ServerStartFailed):
        runner.start(
            fake_config("crashing", **{"api-key": "sk-X-config-key", "fake-crash": "resources"})
        )
    # an imported SGLang log with api_key='sk-Z…'
    log = tmp_path / "server.log"
    fixture = ROOT / "tests" / "fixtures" / "sglang" / "server" / "sm120_qwen35_baseline.log"
    log.write_text(fixture.read_text().replace("api_key=None", "api_key='sk-Z-log-key'"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = invoke(
        ["--ledger", str(ledger), "--session", "s1", "import", str(log)], cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr
    # append: a note quoting a command line, a flag given by -f, a source line
    note = {
        "type": "note_added",
        "text": "ran --api-key sk-Q-note",
        "session_id": "s1",
        "source": "shell: export OPENAI_API_KEY=sk-Q-note",
    }
    done = invoke(["--ledger", str(ledger), "append"], stdin=json.dumps(note), cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr

    started = [e for e in store.read() if e.type == "server_started"]
    assert started[0].flags["api-key"] == "***" and "***" in started[0].argv
    assert started[0].env.get("NCCL_DEBUG") == "INFO" and not {
        "SGLANG_AUTH",
        "NCCL_IB_AUTH",
        "SGLANG_ADMIN_PASS",
    } & set(started[0].env)
    ready = next(e for e in store.read() if e.type == "server_ready")
    assert ready.startup.server_args.get("api_key") == "***"
    failed = next(e for e in store.read() if e.type == "server_failed")
    assert any("api_key='***'" in line for line in failed.log_tail)

    text = stored_text(ledger)
    assert "server_started" in text and "api_key" in text  # the search sees the rows
    assert [s for s in SECRETS if s in text] == []
    exported = invoke(["--ledger", str(ledger), "export", "markdown"], cwd=ROOT, env=env)
    assert exported.returncode == 0 and "keyed" in exported.stdout
    assert [s for s in SECRETS if s in exported.stdout] == []


def test_env_filter_drops_secret_names() -> None:
    config = parse_configs(
        {"configs": {"a": {"engine": "sglang", "model": "m", "env": {"SGLANG_API_KEY": "k"}}}}
    )["a"]
    environ: dict[str, Any] = {
        "SGLANG_ADMIN_PASS": "p",
        "SGLANG_AUTH": "a",
        "NCCL_IB_AUTH": "b",
        "HF_TOKEN": "t",
        "NCCL_DEBUG": "INFO",
        "SGLANG_X": "1",
    }
    assert recorded_env(config, ("SGLANG_", "NCCL_", "HF_"), environ) == {
        "NCCL_DEBUG": "INFO",
        "SGLANG_X": "1",
    }


def test_a_urls_password_is_masked_in_any_text(tmp_path) -> None:
    """postgresql://user:password@host in a note: the password never reaches the file."""
    from ledger.store import LedgerStore
    from schemas.events import NoteAdded

    assert mask_text("postgresql://tuner:hunter2@db/x") == "postgresql://tuner:***@db/x"
    assert mask_text("http://localhost:30000/v1 and https://github.com/a/b") == (
        "http://localhost:30000/v1 and https://github.com/a/b"
    )
    path = tmp_path / "l.duckdb"
    LedgerStore(path).append(NoteAdded(text="hub at postgresql://tuner:hunter2@db/x"))
    assert b"hunter2" not in path.read_bytes()


@pytest.mark.parametrize(
    "field, value",
    [
        ("session_id", "sk-proj-AbCdEfGhIjKlMnOpQrStUv12"),
        ("actor", {"kind": "agent", "name": "hf_AbCdEfGhIjKlMnOpQrStUvWx"}),
    ],
)
def test_an_identifier_holding_a_secret_is_refused_not_stored(tmp_path, field, value) -> None:
    """Identifiers are kept as given (masking would merge sessions), so a token there is refused."""
    from ledger.errors import InvalidInput
    from ledger.store import LedgerStore
    from schemas.events import NoteAdded

    path = tmp_path / "l.duckdb"
    store = LedgerStore(path)
    store.init()
    with pytest.raises(InvalidInput, match="holds a secret"):
        store.append(NoteAdded(text="x", **{field: value}))
    assert store.head() == 0
