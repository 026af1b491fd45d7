"""Every token shape, in every place a secret can leak (docs/reliability.md).

Shapes: those of the maintained rule set (detect-secrets: JWT, GitLab ``glpat-``, Stripe
``sk_live_``, AWS ``AKIA``, Slack, OpenAI, …), ours (``github_pat_``, ``AIza…``, an AWS secret
key with no label, "the password is …", ``hf_``, ``ghp_``, ``sk-proj-``, Bearer credentials, a
URL's password). Places: what is stored (every column of every table, an imported file's and
folder's name in ``events.source``), what is printed (``events``, ``show``, ``sql``, the
Markdown export, ``import``'s report, ``run server show``), error messages, identifiers
(refused, never stored: ``candidate_id``, ``config_name``, ``--config-name``, ``remote --as``,
a configuration's name), the server runner's artifacts log, the resident process's
environment. The values are made here at run time (random, seeded), none is a real credential.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import string
from pathlib import Path

import pytest

from ledger.store import LedgerStore
from schemas.secrets import mask_text, may_hold_secret, may_hold_secrets
from tests.support.cli_inprocess import invoke

ROOT = Path(__file__).resolve().parents[2]


def stored_text(path: Path) -> str:
    """Every value of every column of every table in the ledger file, as text."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [
            row[0]
            for row in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        return "\n".join(str(con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)
    finally:
        con.close()


RNG = random.Random(26)
ALNUM = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def _jwt() -> str:
    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': rand(10), 'iat': 1700000000})}.{rand(43, ALNUM + '-_')}"


def _aws_secret() -> str:
    while True:
        key = rand(40, ALNUM + "/+")
        if "/" in key and any(c.isdigit() for c in key):
            return key


#: name -> (the secret, a text that holds it as people write it)
SHAPES: dict[str, tuple[str, str]] = {}
for _name, _secret, _template in [
    ("jwt", _jwt(), "curl -H 'X-Auth: {}' http://svc/v1/models"),
    ("github_pat", "github_pat_" + rand(22) + "_" + rand(59), "cloned with {} yesterday"),
    ("stripe", "sk_live_" + rand(32), "billing key {} rotated"),
    ("google", "AIza" + rand(35, ALNUM + "-_"), "maps key {} in the config"),
    ("gitlab", "glpat-" + rand(20), "runner token {} for CI"),
    ("aws_unlabelled", _aws_secret(), "pair AKIA-less {} from the console"),
    ("aws_id", "AKIA" + rand(16, string.ascii_uppercase + string.digits), "id {} here"),
    ("prose_password", "Tr0ub4dor-" + rand(6), "the password is {}."),
    ("openai", "sk-proj-" + rand(40, ALNUM + "-_"), "key {} for the judge"),
    ("huggingface", "hf_" + rand(34), "pulled with {}"),
    ("github_classic", "ghp_" + rand(36), "pushed with {}"),
    ("bearer", rand(30), "Authorization: Bearer {}"),
    ("url_password", "pw" + rand(12), "hub at postgresql://tuner:{}@db:5432/hub"),
    ("slack", "xoxb-" + rand(10, string.digits) + "-" + rand(24).lower(), "bot {} posts"),
]:
    SHAPES[_name] = (_secret, _template.format(_secret))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_is_masked_in_text_and_flagged_by_both_gates(name: str) -> None:
    secret, text = SHAPES[name]
    assert may_hold_secret(text)
    assert may_hold_secrets(["nothing here", text, "plain"]) == [False, True, False]
    masked = mask_text(text)
    assert secret not in masked and "***" in masked, masked


@pytest.mark.parametrize(
    "text",
    [
        "sha 3f786850e387550fdab836ed7e6dc881de23001b committed",  # a git digest: a fact
        "class Qwen3MoeForConditionalGeneration loads the weights",
        "the password is not set",
        "--max-total-tokens 412345 --tp 4",
        "served at http://127.0.0.1:30000/v1/chat/completions",
        "event 01928c6e-8a6f-7c3e-9b1e-0a1b2c3d4e5f retracted",
    ],
)
def test_facts_that_look_long_are_kept(text: str) -> None:
    assert mask_text(text) == text


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "l.duckdb"
    LedgerStore(path).init()
    return path


def cli(ledger: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    done = invoke(["--ledger", ledger, *args], stdin=stdin, cwd=ROOT)
    return done.returncode, done.stdout, done.stderr


def leaked(text: str) -> list[str]:
    return [name for name, (secret, _) in SHAPES.items() if secret in text]


def test_no_shape_is_stored_or_printed_anywhere(ledger: Path, tmp_path: Path) -> None:
    # stored: notes, sources, and the names of imported files and folders (events.source)
    for name, (_, text) in SHAPES.items():
        code, _, err = cli(
            ledger,
            "append",
            "note_added",
            "-f",
            f"text={text}",
            "--source",
            f"shell: {text}",
            "--session",
            "s1",
        )
        assert code == 0, (name, err)
    fixture = ROOT / "tests" / "fixtures" / "sglang" / "bench_serving" / "vllm_1129_16_64_32.jsonl"
    imported = []
    for i, name in enumerate(("github_pat", "gitlab", "stripe", "google", "huggingface", "jwt")):
        secret = SHAPES[name][0]
        folder = tmp_path / f"runs-{secret}"
        folder.mkdir()
        target = folder / f"bench-{i}.jsonl"
        # one run each (the same numbers under two names would be one run told two ways)
        target.write_text(fixture.read_text().replace('"duration": 1.149', f'"duration": 1.{i}49'))
        imported.append(target)
    code, out, err = cli(ledger, "--session", "s1", "import", *map(str, imported))
    assert code == 0, err
    assert leaked(out + err) == [] and "***" in out  # the import's report names the files masked
    # a file *named* by a token: its name is the run's configuration name, an identifier
    named = tmp_path / f"bench-{SHAPES['gitlab'][0]}.jsonl"
    named.write_text(fixture.read_text())
    code, out, err = cli(ledger, "--session", "s1", "import", str(named))
    assert code == 3 and "config_name" in err and leaked(out + err) == [], err
    assert leaked(stored_text(ledger)) == []
    # printed: every reading command
    outputs = [
        cli(ledger, "events")[1],
        cli(ledger, "events", "--format", "json")[1],
        cli(ledger, "events", "--format", "csv")[1],
        cli(ledger, "sql", "SELECT * FROM events", "--format", "csv")[1],
        cli(ledger, "export", "markdown")[1],
    ]
    for event in LedgerStore(ledger).read()[:20]:
        outputs.append(cli(ledger, "show", str(event.event_id))[1])
    assert leaked("\n".join(outputs)) == []


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_error_messages_quoting_input_mask_every_shape(ledger: Path, name: str) -> None:
    secret, text = SHAPES[name]
    for args, stdin in (
        (("append",), json.dumps({"type": text})),  # an unknown type quoted back
        (("events", "--type", text), None),
        (("append", "note_added", "-f", f"{text}=1"), None),  # an unknown field quoted back
    ):
        code, _, err = cli(ledger, *args, stdin=stdin)
        assert code in (2, 3) and len(err.splitlines()) == 1, err
        assert secret not in err, err


@pytest.mark.parametrize("name", ["jwt", "github_pat", "stripe", "gitlab", "aws_id", "huggingface"])
def test_identifiers_holding_a_shape_are_refused_not_stored(
    ledger: Path, tmp_path: Path, name: str
) -> None:
    secret = SHAPES[name][0]
    for args in (
        ("append", "note_added", "-f", "text=x", "--session", secret),
        (
            "append",
            "candidate_proposed",
            "-f",
            f"candidate_id=flag:{secret}",
            "-f",
            "kind=flag",
            "-f",
            "title=t",
            "--expected-version",
            "0",
        ),
        (
            "--actor",
            "runner:test",  # a runner's event type: a runner's to append
            "append",
            "benchmark_completed",
            "-f",
            f"config_name={secret}",
            "-f",
            "run_id=r1",
            "-f",
            "concurrency=1",
            "-f",
            "metrics={}",
        ),
        ("remote", "add", "hub", "postgresql://u@db/x", "--as", f"host-{secret}"),
    ):
        code, _, err = cli(ledger, *args)
        assert code == 3 and secret not in err, (args, err)
        assert "secret" in err, err
    # the runners refuse before they run anything
    code, _, err = cli(
        ledger, "run", "bench", "--url", "http://127.0.0.1:9", "--config-name", secret
    )
    assert code == 2 and secret not in err and "holds a secret" in err, err
    configs = tmp_path / "servers.toml"
    configs.write_text(f'[configs."cfg-{secret}"]\nengine = "sglang"\nmodel = "m"\n')
    code, _, err = cli(ledger, "run", "server", "show", "--configs", str(configs))
    assert code == 3 and secret not in err and "holds a secret" in err, err
    assert leaked(stored_text(ledger)) == []


def test_run_server_show_masks_every_secret_of_a_servers_file(tmp_path: Path) -> None:
    url_password = "pa55-" + rand(10)
    values = {
        "api-key": SHAPES["openai"][0],
        "hf-token": SHAPES["huggingface"][0],
        "admin-password": "hunter2-" + rand(8),
    }
    env = {
        "AWS_SECRET_ACCESS_KEY": SHAPES["aws_unlabelled"][0],
        "DATABASE_URL": f"postgresql://tuner:{url_password}@db/x",
        "GITLAB_TOKEN": SHAPES["gitlab"][0],
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    configs = tmp_path / "servers.toml"
    flags = ", ".join(f'{k} = "{v}"' for k, v in values.items())
    envs = ", ".join(f'{k} = "{v}"' for k, v in env.items())
    configs.write_text(
        f'[configs.keyed]\nengine = "sglang"\nmodel = "m"\nflags = {{ {flags}, tp = 2 }}\n'
        f"env = {{ {envs} }}\n"
    )
    done = invoke(["run", "server", "show", "--configs", configs], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    for secret in [
        *values.values(),
        url_password,
        env["AWS_SECRET_ACCESS_KEY"],
        env["GITLAB_TOKEN"],
    ]:
        assert secret not in done.stdout
    assert shown["env"]["CUDA_VISIBLE_DEVICES"] == "0,1" and shown["flags"]["tp"] == 2
    assert shown["env"]["DATABASE_URL"] == "postgresql://tuner:***@db/x"
    assert "--api-key" in shown["argv"] and "***" in shown["argv"]


@pytest.mark.slow
def test_the_artifacts_log_of_a_server_holds_no_secret(ledger: Path) -> None:
    """The fake SGLang server prints its api key in its server_args line, as SGLang does, and
    its argv; the log under <ledger>.artifacts/ is written through the masking pump."""
    from tests.support.fake_sglang import fake_config, make_runner

    store = LedgerStore(ledger)
    runner = make_runner(store)
    key = SHAPES["openai"][0]
    run = runner.start(fake_config("keyed", **{"api-key": key}))
    runner.stop(run)
    log = run.log_path.read_text()
    assert "server_args=ServerArgs(" in log and "api_key='***'" in log
    assert key not in log and leaked(log) == []
    assert run.pump is not None and run.pump.poll() is not None  # ended with the server


@pytest.mark.slow
def test_the_resident_process_keeps_no_secret_of_the_starting_call(tmp_path: Path) -> None:
    """A resident process started from a shell holding API keys: its /proc environment does not
    hold them, and a call forwarded to it still runs with its own client's environment."""
    import subprocess
    import sys
    import tempfile
    import time

    from ledger.frontdoor import launcher
    from ledger.resident_socket import ask_server

    folder = tempfile.mkdtemp(prefix="tl-rt-")  # short: a socket's path is limited to 107 bytes
    os.chmod(folder, 0o700)
    env = {
        **os.environ,
        "TUNELEDGER_RESIDENT": "1",
        "TUNELEDGER_RUNTIME_DIR": folder,
        "TUNELEDGER_RESIDENT_IDLE_S": "300",
        "HF_TOKEN": SHAPES["huggingface"][0],
        "OPENAI_API_KEY": SHAPES["openai"][0],
        "DATABASE_URL": "postgresql://u:" + SHAPES["url_password"][0] + "@db/x",
    }
    pid = launcher.start_server(env)
    assert pid is not None
    try:
        deadline = time.monotonic() + 120
        while ask_server("status", env) is None:
            assert time.monotonic() < deadline, "no resident process answers"
            time.sleep(0.2)
        environ = Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace")
        assert "PATH=" in environ and f"TUNELEDGER_RUNTIME_DIR={folder}" in environ
        for name in ("HF_TOKEN", "OPENAI_API_KEY", "DATABASE_URL"):
            assert f"{name}=" not in environ
        assert leaked(environ) == []
        ledger = tmp_path / "l.duckdb"
        LedgerStore(ledger).init()
        tuneledger = str(Path(sys.executable).with_name("tuneledger"))
        done = subprocess.run(
            [tuneledger, "--ledger", str(ledger), "append", "note_added", "-f", "text=x"],
            capture_output=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        answer = ask_server("status", env)
        assert answer is not None and answer[2] == 1  # the call was forwarded to it
    finally:
        ask_server("stop", env)
        deadline = time.monotonic() + 30
        # the server is this process's child (posix_spawn): reaped here, else it stays in /proc
        # as a zombie and the wait ran its whole 30 s every time
        while time.monotonic() < deadline and os.waitpid(pid, os.WNOHANG)[0] != pid:
            time.sleep(0.2)
        shutil.rmtree(folder, ignore_errors=True)


def test_the_log_pump_masks_every_shape(tmp_path: Path) -> None:
    """What the pump writes for a server that prints each shape (the slow test above runs it
    between a real server process and its log)."""
    from runners.server.log_pump import SYNC, pump

    lines = [f"[2026-12-01 10:00:00] {text}\n" for _, text in SHAPES.values()]
    lines.append("a line cut at EOF without its newline " + SHAPES["jwt"][1])
    log = tmp_path / "server.log"
    log.write_text("kept first line\n")
    data = "".join(lines).encode()
    # a sync request landing inside a line, and one split across two reads
    data = data[:50] + SYNC + data[50:]
    read_fd, write_fd = os.pipe()
    answer_read, answer_write = os.pipe()
    with os.fdopen(write_fd, "wb", buffering=0) as writer:
        writer.write(data[:200] + SYNC[:7])
        writer.write(SYNC[7:] + data[200:])
    pump(read_fd, log, answer_write)
    os.close(read_fd)
    os.close(answer_write)
    assert os.read(answer_read, 10) == b"\n\n"
    written = log.read_text()
    assert written.startswith("kept first line\n[2026-12-01 10:00:00] ")
    assert written.count("\n") == len(SHAPES) + 1 and leaked(written) == []
    assert "\x00" not in written
