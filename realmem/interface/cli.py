"""The `realmem` command line: every /realmem subcommand headless, plus replay, audit,
events, worker, rpc, mcp, hook-server, install, bench and eval.  A thin layer over
``realmem.interface.commands`` and ``realmem.interface.tools``, which the rpc child calls too:
a command parses its arguments, calls one function, asks for confirmation where it writes,
and prints the text (or the details with --json).  A command the registry declares
(``realmem.interface.registry``) takes its options from there and its function through it,
imported on first call; the others import what they need inside their body.  So `realmem rpc`
and `realmem worker` start without loading the whole gate.

Exit codes: 0 success, 1 refused or not found, 2 usage error.
"""

from __future__ import annotations

import gc

# Start-up time: importing click, attrs and realmem builds many objects, and the collector
# would scan them again and again for cycles that are not there.
# What the imports build lives as long as the process: frozen below, never scanned again.
_GC_WAS_ENABLED = gc.isenabled()
gc.disable()

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from realmem import errors, logs
from realmem.stores import ids
from realmem.app import Realmem, RealmemError
from realmem.interface.entry import Entry, Request
from realmem.config import Config, home_dir, override
from realmem.events.types import Action
from realmem.interface import registry
from realmem.words import count


def _out(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def _print(result: dict[str, Any], as_json: bool) -> None:
    """A command's result: its details as JSON, or its text."""
    _out(result["details"]) if as_json else click.echo(result["text"])


def _fail(message: str, code: int = errors.REFUSED) -> NoReturn:
    click.echo(f"realmem: {message}", err=True)
    sys.exit(code)


class Ctx:
    """A command's settings and its request (``Group.invoke`` starts it, so every command
    enters through ``realmem.interface.entry``)."""

    def __init__(self, home: str | None, cwd: str | None, verbose: bool, request: Request) -> None:
        self.home = home
        self.cwd = cwd
        self.verbose = verbose
        self.request = request

    def app(self, *, scan: bool = True, attach: bool = True) -> Realmem:
        """The writer for --cwd: its stores registered (``attach``), outside changes recorded
        (``scan``).  ``attach=False`` appends nothing: replay rebuilds from the log as it is."""
        if self.request.used is None and self.cwd is not None and not Path(self.cwd).is_dir():
            raise errors.UsageError(f"--cwd {self.cwd} is not an existing directory")  # never invent a project there
        return self.request.app(self.cwd, scan=scan, attach=attach)


pass_ctx = click.make_pass_decorator(Ctx)
REQUEST = "realmem.request"  # ctx.meta: the command's request, for its Ctx


class Group(click.Group):
    """Maps realmem's errors to their exit code (``errors.code_of``: 1 refused or not found,
    2 usage), as one line on stderr (the details are in the log)."""

    # Subcommands defined in other modules, imported only when invoked or listed (start-up time).
    LAZY = {"install": "realmem.agents.install:install"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY and name not in self.commands:
            import importlib
            module, attr = self.LAZY[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            # The entry follows the log after the command, and names the file of a read-only,
            # full or damaged REALMEM_HOME in one line (``StorageError``).
            with Entry(ctx.params.get("home")).request() as request:
                ctx.meta[REQUEST] = request
                result = super().invoke(ctx)
        except errors.Error as exc:
            _fail(str(exc), errors.code_of(exc))
        if request.used is not None:
            _unwritten_files(request.used)
        return result


def _unwritten_files(app: Realmem) -> None:
    """A store that could not be written (read-only, full): the change is recorded and its file
    written once the store is writable, so one line says so, and exit 1 when this command's own
    change is waiting; a read only warns (it was served from the tables)."""
    mine, stores = app.projector.unwritten, app.projector.unwritable
    if mine:
        more = f" and {count(len(mine) - 1, 'other file')}" if len(mine) > 1 else ""
        _fail(f"recorded, but its fact file could not be written ({mine[0]}){more}; "
              "realmem writes it once the store is writable again")
    if stores:
        click.echo(f"realmem: warning: fact files wait to be written ({next(iter(stores.values()))}); "
                   "realmem writes them once the store is writable again", err=True)


@click.group(cls=Group)
@click.option("--home", envvar="REALMEM_HOME", help="data directory (default ~/.pi/agent/realmem)")
@click.option("--cwd", help="directory whose project is meant (default: the current one)")
@click.option("--verbose", "-v", is_flag=True, help="log to stderr (default: <home>/realmem.log)")
@click.pass_context
def cli(ctx: click.Context, home: str | None, cwd: str | None, verbose: bool) -> None:
    """realmem: surprise-gated long-term memory for Pi."""
    # Never raw JSON on the terminal: the log goes to a file unless asked for.
    if verbose:
        logs.configure("info")
    else:
        logs.configure(file=home_dir(home) / "realmem.log")
    ctx.obj = Ctx(home, cwd, verbose, ctx.meta[REQUEST])


# --- remembering --------------------------------------------------------------------------

def _max_questions(f):  # type: ignore[no-untyped-def]
    """--max-questions N: questions per SemIf request for this command (overrides semif.maxQuestions)."""
    def apply(ctx: click.Context, param: click.Parameter, value: int | None) -> None:
        if value is not None:
            override("semif.maxQuestions", value)
    return click.option("--max-questions", type=click.IntRange(min=1), expose_value=False, callback=apply,
                        help="questions per SemIf request (overrides semif.maxQuestions)")(f)


def _text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A caption or content: text that can be stored and written to a fact file."""
    if value is not None and "\x00" in value:
        raise click.BadParameter("must not contain a NUL character")
    return value


def _bad_argument() -> str | None:
    """Why a command-line argument is unusable, or None.  Python hands undecodable bytes over
    as lone surrogates; they would fail deep inside with a traceback."""
    for i, arg in enumerate(sys.argv[1:], 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return f"argument {i} ({ascii(arg)[1:-1][:60]}) is not valid UTF-8"
    return None


def _run(name: str, target: Any, /, **given: Any) -> Any:
    """Registry command ``name``'s CLI function on ``target`` (the app or the Config), imported
    on first use: a command that is not run loads nothing."""
    return registry.COMMANDS[name].function(cli=True)(target, **given)


def _registered(name: str, *, skip: tuple[str, ...] = (), **custom: Any) -> Any:
    """The click params of registry command ``name``, generated from its params (``custom``
    replaces one): a command's params are stated once, for the CLI as for rpc and MCP."""
    def apply(f: Any) -> Any:
        for param in reversed(registry.COMMANDS[name].params):
            if param.cli is not None and param.name not in skip:
                f = (custom.get(param.name) or _click_param(param))(f)
        return f
    return apply


def _click_param(param: registry.Param) -> Any:
    """A registry param as a click option (``--name`` or its ``cli`` spelling) or, spelled in
    capitals, an argument; the handler's keyword is its name in the function."""
    kind: Any = click.Choice(param.choices) if param.choices else \
        click.IntRange(1, registry.MAX_INT) if param.type == "int" else None
    if param.cli and param.cli.isupper():
        many = param.type == "strs"
        metavar = param.cli if param.required else f"[{param.cli}]"
        return click.argument(param.keyword, metavar=metavar + ("..." if many else ""), nargs=-1 if many else 1,
                              required=param.required, type=kind)
    flag = param.cli or "--" + param.name.replace("_", "-")
    if param.type == "bool":
        return click.option(f"{flag}/--no-{flag[2:]}" if param.default else flag, param.keyword, is_flag=True,
                            default=bool(param.default), help=param.help)
    default = param.default if param.type == "int" and not param.required else None
    return click.option(flag, param.keyword, required=param.required, multiple=param.type == "strs", type=kind,
                        default=default, show_default=default is not None, help=param.help,
                        callback=_text if param.type == "text" else None)


def _words(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> str | None:
    """The words of a QUERY argument as one query."""
    return " ".join(value) or None


def _query(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[str]:
    """The words of recall's QUERY argument as its one query."""
    return [" ".join(value)] if value else []


def _remember(c: Ctx, as_json: bool, given: dict[str, Any]) -> None:
    out = _run("remember", c.app(), **given)
    _print(out, as_json)
    if out["details"]["action"] in (Action.REFUSE, Action.REJECT):
        sys.exit(errors.REFUSED)
    if warned := _run("check_paths", c.app(), raw=given["paths"])["text"]:  # the add screen's check, on stderr
        click.echo(warned, err=True)


@cli.command()
@_registered("remember")
@click.option("--json", "as_json", is_flag=True)
@_max_questions
@pass_ctx
def remember(c: Ctx, as_json: bool, **given: Any) -> None:
    """The agent's remember path, gate included; prints the decision."""
    _remember(c, as_json, given)


@cli.command()
@_registered("remember", skip=("user_requested",))
@click.option("--json", "as_json", is_flag=True)
@_max_questions
@pass_ctx
def add(c: Ctx, as_json: bool, **given: Any) -> None:
    """Remember a fact yourself (user_requested)."""
    _remember(c, as_json, given | {"user_requested": True, "source": "add"})


@cli.command()
@_registered("debug")
@click.option("--json", "as_json", is_flag=True)
@_max_questions
@pass_ctx
def debug(c: Ctx, as_json: bool, **given: Any) -> None:
    """Dry-run the remember path and show the full trace."""
    _print(_run("debug", c.app(), **given), as_json)


@cli.command()
@pass_ctx
def retry(c: Ctx) -> None:
    """Retry this project's queued candidates now (the worker also retries them with backoff)."""
    click.echo(_run("retry", c.app(), progress=lambda d, t: click.echo(f"  {d}/{t}", err=True))["text"])


# --- reading ------------------------------------------------------------------------------

@cli.command()
@_registered("recall", queries=click.argument("queries", nargs=-1, metavar="[QUERY]...", callback=_query))
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def recall(c: Ctx, as_json: bool, **given: Any) -> None:
    """Hybrid search, ranked by path, then used, then relevance."""
    found = _run("recall", c.app(), **given)
    _print(found, as_json)
    if found["failed"]:
        sys.exit(errors.REFUSED)


@cli.command(name="list")
@_registered("list")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def list_cmd(c: Ctx, as_json: bool, **given: Any) -> None:
    """Every memory, sorted by path, then used."""
    _print(_run("list", c.app(), **given), as_json)


@cli.command()
@_registered("show")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def show(c: Ctx, as_json: bool, **given: Any) -> None:
    """One memory with its metadata."""
    _print(_run("show", c.app(), **given), as_json)


@cli.command()
@_registered("forget")
@pass_ctx
def forget(c: Ctx, **given: Any) -> None:
    """Delete memories by id (or unique prefix)."""
    click.echo(_run("forget", c.app(), **given)["text"])


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def status(c: Ctx, as_json: bool) -> None:
    """Counts per store, queue, worker, endpoints, gitignore warning."""
    from realmem.interface import render, status as st  # not tools.status: it loads the gate; status starts fast
    info = st.gather(c.app())
    _out(info) if as_json else click.echo(render.status_text(info))


@cli.command()
@pass_ctx
def scan(c: Ctx) -> None:
    """Read every fact file changed outside realmem now (session start does this too)."""
    from realmem.interface import commands  # lazy: start-up
    click.echo(commands.scan(c.app(scan=False))["text"])


# --- the log ------------------------------------------------------------------------------

@cli.command()
@click.option("--check", is_flag=True, help="rebuild into a scratch copy and compare; exit 1 on any difference")
@pass_ctx
def replay(c: Ctx, check: bool) -> None:
    """Rebuild every projection from the event log."""
    from realmem.projections import replay as rp  # lazy: start-up
    app = c.app(attach=False)
    progress = lambda d, t: click.echo(f"  replaying {d}/{t}", err=True)  # noqa: E731
    if check:
        rep = rp.check(app, progress)
        for d in rep.differences:
            click.echo(d)
        click.echo(f"{count(rep.events, 'event')}, {count(rep.memories, 'memory')}: "
                   + ("identical to a rebuild" if not rep.differences else f"{len(rep.differences)} differences"))
        sys.exit(1 if rep.differences else 0)
    rep = rp.replay(app, progress)
    click.echo(f"Replayed {count(rep.events, 'event')} into {count(rep.memories, 'memory')} in {rep.seconds:.2f}s "
               f"({rep.rate:,.0f} events/s); files written {rep.files_written}, deleted {rep.files_deleted}.")


@cli.command()
@pass_ctx
def repair(c: Ctx) -> None:
    """Move a damaged realmem.sqlite aside (kept) and rebuild it from the fact files."""
    from realmem.write import repair as rp  # lazy: start-up
    done = rp.repair(home_dir(c.home), Path(c.cwd or Path.cwd()))
    click.echo(f"{done.aside.parent / 'realmem.sqlite'} was damaged ({done.problem}); moved aside to {done.aside} "
               "(kept, not deleted).")
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(done.memories.items())) or "none"
    click.echo(f"Rebuilt from the fact files of {count(len(done.projects), 'project')}: "
               f"{count(sum(done.memories.values()), 'memory')} ({kinds}).")
    for root in done.missing:
        click.echo(f"Not rebuilt: {root} is gone; its personal memories come back when realmem runs there.")
    click.echo(f"Lost with the old database: {rp.LOST}. The worker recomputes embeddings.")


def _event_json(env) -> dict:  # type: ignore[no-untyped-def]
    from realmem.events.types import to_payload  # lazy: start-up
    return {"seq": env.seq, "time": env.time, "type": env.event.TYPE, "pid": env.pid, "session": env.session,
            "memory_id": ids.short(env.event.memory_id) if env.event.memory_id else None,
            "store": env.event.store_id, "payload": to_payload(env.event)}


def _event_line(env) -> str:  # type: ignore[no-untyped-def]
    from realmem.events import types as ev  # lazy: start-up
    e = env.event
    what = e.TYPE
    if isinstance(e, (ev.MemoryAdded, ev.MemoryEdited, ev.FileObserved)) and e.fields is not None:
        what += f" “{e.fields.caption}”"
    if isinstance(e, ev.MemoryEdited):
        what += f" ({e.reason})"
    if isinstance(e, ev.MemoryMoved):
        what += f" → {e.to_store}"
    if isinstance(e, ev.Decided):
        what += f" {e.action} by rule {e.rule}"
    if isinstance(e, (ev.MemoryForgotten,)):
        what += f" ({e.reason})"
    mid = ids.short(e.memory_id)[:10] if e.memory_id else ""
    by = f"  by {env.session}" if env.session else ""  # the actor: a Pi session or an agent (name/version#session)
    return f"{env.seq:>6}  {env.time}  {mid:<10}  {what}{by}"


@cli.command()
@click.argument("id_value")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def audit(c: Ctx, id_value: str, as_json: bool) -> None:
    """The whole history of a memory: every event and decision with its raw judge answers."""
    from realmem.events import log  # lazy: start-up
    app = c.app(scan=False)
    canonical = ids.canonical(id_value)
    if canonical is None:
        try:
            canonical = app.resolve(id_value)[1]
        except RealmemError:
            known = [r[0] for r in app.conn.execute("SELECT DISTINCT memory_id FROM events WHERE memory_id IS NOT NULL")]
            try:
                canonical = ids.resolve(id_value, known)
            except ids.IdError as exc:
                raise RealmemError(str(exc)) from None
    envs = log.for_memory(app.conn, canonical)
    if not envs:
        raise RealmemError(f"no events for {id_value}")
    if as_json:
        _out([_event_json(e) for e in envs])
        return
    from realmem.events import trace as gate_trace  # lazy: start-up
    from realmem.events import types as ev  # lazy: start-up
    from realmem.interface.render import render_trace  # lazy: start-up
    for env in envs:
        click.echo(_event_line(env))
        if isinstance(env.event, ev.Decided):
            t = gate_trace.load(env.event.trace)
            if t is not None:  # the gate's trace, of any version
                click.echo("\n".join("        " + line for line in render_trace(t).splitlines()))
            else:  # consolidation records its own evidence
                click.echo("        " + json.dumps(env.event.trace, ensure_ascii=False, default=str)[:2000])


@cli.command()
@click.option("--since", default=0, help="only events after this sequence number")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def events(c: Ctx, since: int, as_json: bool) -> None:
    """The event log."""
    from realmem.events import log  # lazy: start-up
    app = c.app(scan=False)
    if as_json:
        _out([_event_json(e) for e in log.read(app.conn, since)])
        return
    for env in log.read(app.conn, since):
        click.echo(_event_line(env))


# --- maintenance --------------------------------------------------------------------------

@cli.command()
@pass_ctx
def reindex(c: Ctx) -> None:
    """Rebuild the FTS5 and vector indexes from the memories and the embeddings cache."""
    click.echo(_run("reindex", c.app())["text"])


@cli.command()
@pass_ctx
def embed(c: Ctx) -> None:
    """Embed every memory that has no cached vector in the current embedding space."""
    click.echo(_run("embed", c.app(), progress=lambda d, t: click.echo(f"  embedded {d}/{t}", err=True))["text"])


@cli.command()
@_registered("consolidate")
@click.option("--json", "as_json", is_flag=True)
@_max_questions
@pass_ctx
def consolidate(c: Ctx, as_json: bool, **given: Any) -> None:
    """Shrink and clean the memory base (Ctrl-C cancels and writes nothing)."""
    from realmem.interface import commands  # lazy: start-up
    try:
        done = _run("consolidate", c.app(), **given, progress=lambda d, t, m: click.echo(f"  {d}/{t} {m}", err=True))
    except KeyboardInterrupt:
        _print(commands.consolidate_cancelled(c.app(), given["stores"]), as_json)
        sys.exit(errors.REFUSED)
    _print(done, as_json)


@cli.group()
def settings() -> None:
    """config.json: show, set, unset, test, models."""


@settings.command(name="show")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def settings_show(c: Ctx, as_json: bool) -> None:
    """Every setting: section, value (keys masked), source (default, file, env)."""
    shown = _run("settings_get", Config(home_dir(c.home)))
    if as_json:  # keyed by setting, for scripts (`jq '."gate.importance".value'`)
        _out({i["key"]: {"value": i["value"], "source": i["source"], **({"problem": i["problem"]} if i["problem"] else {})}
              for i in shown["details"]["items"]})
        return
    click.echo(shown["text"])


@settings.command(name="set")
@_registered("settings_set")
@pass_ctx
def settings_set(c: Ctx, **given: Any) -> None:
    """Set KEY to VALUE in config.json (keys may be $VAR or env:VAR)."""
    click.echo(_run("settings_set", Config(home_dir(c.home)), **given)["text"])


@settings.command(name="unset")
@click.argument("key")
@pass_ctx
def settings_unset(c: Ctx, key: str) -> None:
    """Reset KEY to its default (remove it from config.json)."""
    from realmem.interface import settings as st  # lazy: start-up
    click.echo(st.unset(Config(home_dir(c.home)), key)["text"])


@settings.command(name="test")
@pass_ctx
def settings_test(c: Ctx) -> None:
    """Connectivity test of every configured endpoint."""
    tested = _run("settings_test", Config(home_dir(c.home)))
    click.echo(tested["text"])
    sys.exit(errors.REFUSED if tested["failed"] else 0)


@settings.command(name="models")
@_registered("settings_models")
@pass_ctx
def settings_models(c: Ctx, **given: Any) -> None:
    """List the models the endpoint's /v1/models offers."""
    if listed := _run("settings_models", Config(home_dir(c.home)), **given)["text"]:
        click.echo(listed)


@cli.command(name="import")
@_registered("import_begin")
@pass_ctx
def import_cmd(c: Ctx, **given: Any) -> None:
    """Split AGENTS.md / CLAUDE.md into facts (through the chat model) and remember them.

    Example: realmem import AGENTS.md
    """
    done = _run("import_begin", c.app(), **given, progress=lambda d, t, f: click.echo(f"  {f}: {d}/{t}", err=True))
    click.echo(done["text"])
    if done["failed"]:
        sys.exit(errors.REFUSED)


@cli.command(name="prune-paths")
@click.option("--yes", is_flag=True, help="apply without asking")
@pass_ctx
def prune_paths(c: Ctx, yes: bool) -> None:
    """Drop paths that no longer exist; a memory whose paths are all gone is deleted."""
    app = c.app()
    plan = _run("prune_paths", app, apply=False)
    click.echo(plan["text"])
    if not plan["details"]["changes"]:
        return
    if not yes and not click.confirm("Apply these changes?", default=False):
        sys.exit(errors.REFUSED)
    done = _run("prune_paths", app, apply=True)["details"]["changes"]
    click.echo(f"Pruned {count(len(done), 'memory')}.")


@cli.command(name="fix-gitignore")
@click.option("--check", "check_only", is_flag=True, help="only report; exit 1 when the store is ignored")
@click.option("--yes", is_flag=True, help="apply without asking")
@pass_ctx
def fix_gitignore(c: Ctx, check_only: bool, yes: bool) -> None:
    """Check whether .pi/realmem is ignored by git and append the verified fix."""
    app = c.app(scan=False)
    checked = _run("gitignore_check", app, offer_fix=not check_only)
    click.echo(checked["text"])
    if not checked["details"]["ignored"]:
        return
    if check_only or checked["details"]["fix"] is None:
        sys.exit(errors.REFUSED)
    if not yes and not click.confirm("Append it?", default=False):
        sys.exit(errors.REFUSED)
    after = _run("gitignore_fix", app)["details"]
    click.echo("Fixed: .pi/realmem is no longer ignored." if not after["ignored"] else "Still ignored!")
    sys.exit(errors.REFUSED if after["ignored"] else 0)


@cli.command()
@_registered("manage_list", query=click.argument("query", nargs=-1, metavar="[QUERY]...", callback=_words))
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def manage(c: Ctx, as_json: bool, **given: Any) -> None:
    """Browse memories with urgency glyphs (● full · ◐ caption · ○ count · ? unjudged; ✗ missing path;
    Δ changed in git since written; Q quarantined)."""
    listed = _run("manage_list", c.app(), **given)
    _out(listed["details"]["items"]) if as_json else click.echo(listed["text"])


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def stale(c: Ctx, as_json: bool) -> None:
    """Memories whose paths changed in git after their `updated` time, most commits first.

    Example: realmem stale --json
    """
    from realmem.read import freshness  # lazy: start-up
    from realmem.interface.render import memory_json, table  # lazy: start-up
    app = c.app()
    rows = freshness.stale_memories(app)
    if as_json:
        _out([memory_json(m, *app.counters((m.store, m.id))) | {"stale": s.to_json()} for m, s in rows])
        return
    if not rows:
        click.echo("No stale memories: no memory's paths changed in git after it was written.")
        return
    click.echo(table(["id", "scope", "changed", "commits", "since", "caption"],
                     [[ids.short(m.id), m.store.split(":")[0], ", ".join(s.paths),
                       f"{s.commits}{'+' if s.at_least else ''}", s.since, m.caption] for m, s in rows]))
    click.echo(f"{count(len(rows), 'stale memory', 'stale memories')}: check each against the code, "
               "an edit in Pi (/realmem manage, e) clears the flag.")


@cli.command()
@_registered("approve")
@pass_ctx
def approve(c: Ctx, **given: Any) -> None:
    """Release a quarantined memory (it failed the safety scan when it arrived from outside)."""
    click.echo(_run("approve", c.app(), **given)["text"])


@cli.command()
@click.option("--idle", type=float, default=None, help="exit after this many idle seconds")
@_max_questions
@pass_ctx
def worker(c: Ctx, idle: float | None) -> None:
    """The background worker (embed, judge urgency, retry queued candidates)."""
    from realmem.jobs.worker import run  # lazy: start-up
    if not c.verbose:
        logs.configure("info", file=home_dir(c.home) / "worker.log")
    sys.exit(run(home_dir(c.home), idle_seconds=idle))


@cli.command()
@pass_ctx
def rpc(c: Ctx) -> None:
    """The Pi adapter's child: JSON-RPC 2.0 over stdio."""
    from realmem.interface.rpc import serve  # lazy: start-up
    sys.exit(serve(c.home))


@cli.command()
@pass_ctx
def mcp(c: Ctx) -> None:
    """Serve the realmem tools, prompt and resource to any MCP client over stdio."""
    from realmem.agents.mcp_server import serve  # lazy: start-up
    sys.exit(serve(c.home, c.cwd))


@cli.command("hook-server")
@click.option("--idle", type=float, default=None, help="exit after this many idle seconds")
@pass_ctx
def hook_server(c: Ctx, idle: float | None) -> None:
    """The per-home server the agent hooks reach over a Unix socket (started on demand)."""
    from realmem.agents.hookserver import run  # lazy: start-up
    sys.exit(run(home_dir(c.home), idle_seconds=idle))


@cli.command()
@click.option("--sizes", default="10000", help="comma-separated store sizes, e.g. 10000,100000")
@click.option("--json", "as_json", is_flag=True)
@click.option("--quick", is_flag=True, help="fewer iterations (for a smoke run)")
@click.option("--only", default="", help="comma-separated groups to measure (default all): replay, open, freshness, "
              "recall, path_notes, hook, mcp, gate, status, worker, ingest, local")
def bench(sizes: str, as_json: bool, quick: bool, only: str) -> None:
    """Benchmark suite: every performance target, each with its floor from the same run and the ratio."""
    from realmem.interface.bench import GROUPS, run_bench  # lazy: start-up
    picked = {g.strip() for g in only.split(",") if g.strip()}
    if unknown := sorted(picked - GROUPS.keys()):
        raise click.BadParameter(f"unknown group {', '.join(unknown)}; groups: {', '.join(GROUPS)}", param_hint="--only")
    results = run_bench([int(s) for s in sizes.split(",") if s.strip()], quick=quick,
                        progress=lambda m: click.echo(m, err=True), only=picked or None)
    if as_json:
        from realmem.interface.bench import rows  # lazy: start-up
        _out({"rows": rows(results), "results": results})
    else:
        from realmem.interface.bench import render  # lazy: start-up
        click.echo(render(results))


@cli.group(name="eval")
def eval_group() -> None:
    """Shipped evaluations."""


@eval_group.command(name="recall")
@click.option("--mode", "modes", multiple=True,
              type=click.Choice(["bm25", "e5", "local", "embedder", "judge", "judge-noisy", "judge-chat"]),  # evaluation.MODES
              help="one mode (repeatable; default: all)")
@click.option("--set", "set_name", type=click.Choice(["dev", "public"]), default="public", show_default=True,
              help="dev: written beside the rule; public: verbatim public facts, questions written blind")
@click.option("--split", type=click.Choice(["all", "tune", "held-out"]), default="all", show_default=True,
              help="the public set's queries that tuned the rule, or those held out of tuning")
@click.option("--store", type=click.Choice(["split", "all"]), default="split", show_default=True,  # evaluation.STORES
              help="with a split: only its projects' facts in the store, or every fact (the other split's as distractors)")
@click.option("--file", "set_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="another evaluation set in the same YAML form")
@click.option("--json", "as_json", is_flag=True)
def eval_recall(modes: tuple[str, ...], set_name: str, split: str, store: str, set_path: Path | None,
                as_json: bool) -> None:
    """Replay a recall evaluation set in sequence, hits counted: BM25 only, e5 alone, the bundled
    local embedder (e5 and USE fused), the fake embedder, and the local embedder with a System
    One relevance check (a perfect fake, and one wrong 10% of the time) or the chat judge's (the
    perfect fake behind a chat endpoint); print recall@1/@3 as
    seen and strong-only, MRR, on-topic and off-topic silence, and the first stage's candidate
    recall@10/@20.

    Example: realmem eval recall --set public --split held-out --mode local
    """
    from realmem.interface import evaluation  # lazy: start-up
    reports = evaluation.run(modes or evaluation.MODES, path=set_path, name=set_name, split=split, store=store,
                             progress=lambda m: click.echo(m, err=True))
    if as_json:
        _out([r.summary() for r in reports])
    else:
        click.echo(evaluation.render(reports))


gc.freeze()
if _GC_WAS_ENABLED:
    gc.enable()


def main() -> None:
    if (bad := _bad_argument()) is not None:
        _fail(bad, errors.USAGE)
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.UsageError as exc:
        exc.show()
        sys.exit(errors.USAGE)
    except click.exceptions.Abort:
        sys.exit(errors.REFUSED)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except SystemExit:
        raise


if __name__ == "__main__":
    main()
