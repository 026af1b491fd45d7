"""``tuneledger mcp``: the ledger as a Model Context Protocol server, a front end beside the CLI.

Modules: ``command`` (the click command), ``server`` (the SDK's low-level server over the
toolbox), ``toolbox`` (tools as data, the seat, one call), ``records`` (the generated
``record_<event_type>`` tools), ``verbs`` (init, propose, triage, decide), ``reads`` (the read
tools), ``resources`` and ``next_step`` (resources and the prompt), ``errors`` (refusals as tool
errors), ``values`` (JSON of rows and events). The runners contribute their long-running tools
through the ``tuneledger.mcp_tools`` entry point group (``runners/mcp.py``).
"""
