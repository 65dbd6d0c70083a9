"""The `realmem` command line: every /realmem subcommand headless, plus replay, audit,
events, worker, rpc, mcp, hook-server, install, bench and eval.  A thin layer over
``realmem.interface.commands`` and ``realmem.interface.tools``, which the rpc child calls too:
a command parses its arguments, calls one function, asks for confirmation where it writes,
and prints the text (or the details with --json).  Each command imports what it needs inside its body, so `realmem rpc`
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
from realmem.stores.project import SCOPES
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


def _remember_options(f):  # type: ignore[no-untyped-def]
    f = _max_questions(f)
    f = click.option("--json", "as_json", is_flag=True)(f)
    f = click.option("--path", "paths", multiple=True, help="file, directory or glob (repeatable)")(f)
    f = click.option("--scope", type=click.Choice(SCOPES))(f)
    f = click.option("--content", required=True, callback=_text)(f)
    f = click.option("--caption", required=True, callback=_text)(f)
    return f


def _remember(c: Ctx, caption: str, content: str, scope: str | None, paths: tuple[str, ...], user_requested: bool,
              as_json: bool, source: str) -> None:
    from realmem.interface import commands  # lazy: start-up
    out = commands.remember(c.app(), caption=caption, content=content, scope=scope, paths=paths,
                            user_requested=user_requested, source=source)
    _print(out, as_json)
    if out["details"]["action"] in (Action.REFUSE, Action.REJECT):
        sys.exit(errors.REFUSED)
    if warned := commands.check_paths(c.app(), paths)["text"]:  # the add screen's paths check, on stderr
        click.echo(warned, err=True)


@cli.command()
@_remember_options
@click.option("--user-requested", is_flag=True, help="the user asked for it: bypass the importance gate")
@pass_ctx
def remember(c: Ctx, caption: str, content: str, scope: str | None, paths: tuple[str, ...], user_requested: bool,
             as_json: bool) -> None:
    """The agent's remember path, gate included; prints the decision."""
    _remember(c, caption, content, scope, paths, user_requested, as_json, "remember")


@cli.command()
@_remember_options
@pass_ctx
def add(c: Ctx, caption: str, content: str, scope: str | None, paths: tuple[str, ...], as_json: bool) -> None:
    """Remember a fact yourself (user_requested)."""
    _remember(c, caption, content, scope, paths, True, as_json, "add")


@cli.command()
@click.option("--caption", required=True, callback=_text)
@click.option("--content", required=True, callback=_text)
@click.option("--scope", type=click.Choice(SCOPES))
@click.option("--path", "paths", multiple=True)
@click.option("--user-requested", is_flag=True)
@click.option("--write", is_flag=True, help="perform the write for real")
@click.option("--json", "as_json", is_flag=True)
@_max_questions
@pass_ctx
def debug(c: Ctx, caption: str, content: str, scope: str | None, paths: tuple[str, ...], user_requested: bool,
          write: bool, as_json: bool) -> None:
    """Dry-run the remember path and show the full trace."""
    from realmem.interface import commands  # lazy: start-up
    _print(commands.debug(c.app(), caption=caption, content=content, scope=scope, paths=paths,
                          user_requested=user_requested, write=write), as_json)


@cli.command()
@pass_ctx
def retry(c: Ctx) -> None:
    """Retry this project's queued candidates now (the worker also retries them with backoff)."""
    from realmem.interface import commands  # lazy: start-up
    click.echo(commands.retry(c.app(), progress=lambda d, t: click.echo(f"  {d}/{t}", err=True))["text"])


# --- reading ------------------------------------------------------------------------------

@cli.command()
@click.argument("query", nargs=-1)
@click.option("--path", "paths", multiple=True)
@click.option("--id", "id_values", multiple=True)
@click.option("--scope", type=click.Choice(SCOPES))
@click.option("--page", default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def recall(c: Ctx, query: tuple[str, ...], paths: tuple[str, ...], id_values: tuple[str, ...], scope: str | None,
           page: int, as_json: bool) -> None:
    """Hybrid search, ranked by path, then used, then relevance."""
    from realmem.interface import commands  # lazy: start-up
    found = commands.recall(c.app(), queries=[" ".join(query)] if query else [], paths=paths, id_values=id_values,
                            page=page, scope=scope)
    _print(found, as_json)
    if found["failed"]:
        sys.exit(errors.REFUSED)


@cli.command(name="list")
@click.option("--scope", type=click.Choice(SCOPES))
@click.option("--page", default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def list_cmd(c: Ctx, scope: str | None, page: int, as_json: bool) -> None:
    """Every memory, sorted by path, then used."""
    from realmem.interface import commands  # lazy: start-up
    _print(commands.listing(c.app(), page=page, scope=scope), as_json)


@cli.command()
@click.argument("id_value")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def show(c: Ctx, id_value: str, as_json: bool) -> None:
    """One memory with its metadata."""
    from realmem.interface import commands  # lazy: start-up
    _print(commands.show_text(c.app(), id_value), as_json)


@cli.command()
@click.argument("id_values", nargs=-1, required=True)
@pass_ctx
def forget(c: Ctx, id_values: tuple[str, ...]) -> None:
    """Delete memories by id (or unique prefix)."""
    from realmem.interface.tools import forget as forget_ids  # lazy: start-up
    click.echo(forget_ids(c.app(), id_values)["text"])


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
    from realmem.interface import commands  # lazy: start-up
    click.echo(commands.reindex(c.app())["text"])


@cli.command()
@pass_ctx
def embed(c: Ctx) -> None:
    """Embed every memory that has no cached vector in the current embedding space."""
    from realmem.interface import commands  # lazy: start-up
    click.echo(commands.embed(c.app(), progress=lambda d, t: click.echo(f"  embedded {d}/{t}", err=True))["text"])


@cli.command()
@click.argument("scopes", nargs=-1, type=click.Choice(SCOPES))
@click.option("--no-paths", is_flag=True, help="skip the path revision pass")
@click.option("--json", "as_json", is_flag=True)
@_max_questions
@pass_ctx
def consolidate(c: Ctx, scopes: tuple[str, ...], no_paths: bool, as_json: bool) -> None:
    """Shrink and clean the memory base (Ctrl-C cancels and writes nothing)."""
    from realmem.interface import commands  # lazy: start-up
    try:
        done = commands.consolidate(c.app(), stores=scopes, revise_paths=not no_paths,
                                    progress=lambda d, t, m: click.echo(f"  {d}/{t} {m}", err=True))
    except KeyboardInterrupt:
        _print(commands.consolidate_cancelled(c.app(), scopes), as_json)
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
    from realmem.interface import settings as st  # lazy: start-up
    shown = st.show(Config(home_dir(c.home)))
    if as_json:  # keyed by setting, for scripts (`jq '."gate.importance".value'`)
        _out({i["key"]: {"value": i["value"], "source": i["source"], **({"problem": i["problem"]} if i["problem"] else {})}
              for i in shown["details"]["items"]})
        return
    click.echo(shown["text"])


@settings.command(name="set")
@click.argument("key")
@click.argument("value")
@pass_ctx
def settings_set(c: Ctx, key: str, value: str) -> None:
    """Set KEY to VALUE in config.json (keys may be $VAR or env:VAR)."""
    from realmem.interface import settings as st  # lazy: start-up
    click.echo(st.set_value(Config(home_dir(c.home)), key, value)["text"])


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
    from realmem.interface import settings as st  # lazy: start-up
    tested = st.connectivity(Config(home_dir(c.home)))
    click.echo(tested["text"])
    sys.exit(errors.REFUSED if tested["failed"] else 0)


@settings.command(name="models")
@click.argument("endpoint", type=click.Choice(["semif", "embedding", "rewriter"]))
@pass_ctx
def settings_models(c: Ctx, endpoint: str) -> None:
    """List the models the endpoint's /v1/models offers."""
    from realmem.interface import settings as st  # lazy: start-up
    if listed := st.models(Config(home_dir(c.home)), endpoint)["text"]:
        click.echo(listed)


@cli.command(name="import")
@click.argument("files", nargs=-1)
@click.option("--force", is_flag=True, help="import again files that are already imported and unchanged")
@pass_ctx
def import_cmd(c: Ctx, files: tuple[str, ...], force: bool) -> None:
    """Split AGENTS.md / CLAUDE.md into facts (through the chat model) and remember them.

    Example: realmem import AGENTS.md
    """
    from realmem.interface import commands  # lazy: start-up
    done = commands.import_files(c.app(), files, force=force,
                                 progress=lambda d, t, f: click.echo(f"  {f}: {d}/{t}", err=True))
    click.echo(done["text"])
    if done["failed"]:
        sys.exit(errors.REFUSED)


@cli.command(name="prune-paths")
@click.option("--yes", is_flag=True, help="apply without asking")
@pass_ctx
def prune_paths(c: Ctx, yes: bool) -> None:
    """Drop paths that no longer exist; a memory whose paths are all gone is deleted."""
    from realmem.interface import commands  # lazy: start-up
    app = c.app()
    plan = commands.prune_paths(app, apply=False)
    click.echo(plan["text"])
    if not plan["details"]["changes"]:
        return
    if not yes and not click.confirm("Apply these changes?", default=False):
        sys.exit(errors.REFUSED)
    done = commands.prune_paths(app, apply=True)["details"]["changes"]
    click.echo(f"Pruned {count(len(done), 'memory')}.")


@cli.command(name="fix-gitignore")
@click.option("--check", "check_only", is_flag=True, help="only report; exit 1 when the store is ignored")
@click.option("--yes", is_flag=True, help="apply without asking")
@pass_ctx
def fix_gitignore(c: Ctx, check_only: bool, yes: bool) -> None:
    """Check whether .pi/realmem is ignored by git and append the verified fix."""
    from realmem.interface import commands  # lazy: start-up
    app = c.app(scan=False)
    checked = commands.gitignore_check(app, offer_fix=not check_only)
    click.echo(checked["text"])
    if not checked["details"]["ignored"]:
        return
    if check_only or checked["details"]["fix"] is None:
        sys.exit(errors.REFUSED)
    if not yes and not click.confirm("Append it?", default=False):
        sys.exit(errors.REFUSED)
    after = commands.gitignore_fix(app)["details"]
    click.echo("Fixed: .pi/realmem is no longer ignored." if not after["ignored"] else "Still ignored!")
    sys.exit(errors.REFUSED if after["ignored"] else 0)


@cli.command()
@click.argument("query", nargs=-1)
@click.option("--semantic", is_flag=True, help="hybrid search instead of a substring filter")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def manage(c: Ctx, query: tuple[str, ...], semantic: bool, as_json: bool) -> None:
    """Browse memories with urgency glyphs (● full · ◐ caption · ○ count · ? unjudged; ✗ missing path;
    Δ changed in git since written; Q quarantined)."""
    from realmem.interface import commands  # lazy: start-up
    listed = commands.manage_list(c.app(), query=" ".join(query) or None, semantic=semantic)
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
@click.argument("id_value")
@pass_ctx
def approve(c: Ctx, id_value: str) -> None:
    """Release a quarantined memory (it failed the safety scan when it arrived from outside)."""
    from realmem.interface import commands  # lazy: start-up
    click.echo(commands.approve(c.app(), id_value)["text"])


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
              type=click.Choice(["bm25", "e5", "local", "embedder", "judge", "judge-noisy"]),  # evaluation.MODES
              help="one mode (repeatable; default: all)")
@click.option("--set", "set_name", type=click.Choice(["dev", "public"]), default="public", show_default=True,
              help="dev: written beside the rule; public: verbatim public facts, questions written blind")
@click.option("--split", type=click.Choice(["all", "tune", "held-out"]), default="all", show_default=True,
              help="the public set's queries that tuned the rule, or those held out of tuning")
@click.option("--file", "set_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="another evaluation set in the same YAML form")
@click.option("--json", "as_json", is_flag=True)
def eval_recall(modes: tuple[str, ...], set_name: str, split: str, set_path: Path | None, as_json: bool) -> None:
    """Replay a recall evaluation set in sequence, hits counted: BM25 only, e5 alone, the bundled
    local embedder (e5 and USE fused), the fake embedder, and the local embedder with a System
    One relevance check (a perfect fake, and one wrong 10% of the time); print recall@1/@3 as
    seen and strong-only, MRR, on-topic and off-topic silence, and the first stage's candidate
    recall@10/@20.

    Example: realmem eval recall --set public --split held-out --mode local
    """
    from realmem.interface import evaluation  # lazy: start-up
    reports = evaluation.run(modes or evaluation.MODES, path=set_path, name=set_name, split=split,
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
