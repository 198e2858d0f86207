"""Handlers behind `console COMMAND`. Each returns an exit code."""
from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from .engine import sources
from .paths import DEMO_CANDIDATES, DEMO_MAIN, DEMO_PROFILE
from .errors import ExitCode, UsageError
from .profile import Profile, ProfileError, load_profile
from .round.follow import follow


# --- rounds ------------------------------------------------------------------

def _default_out(profile: Profile) -> Path:
    """Results go under the working directory, never beside the installed package."""
    return Path.cwd() / "results" / profile.name


def _out_dir(path: Path, option: str = "--out") -> Path:
    """``path`` resolved, refused when it or a folder above it is a file (mkdir would fail later)."""
    path = path.resolve()
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise UsageError(f"{option} {path}: expected a directory, but {p} is a file",
                                 "Give a directory (it is made if missing).")
            break
    return path


def _results_dir(profile: Profile, args) -> Path:
    return _out_dir(args.out) if args.out else _default_out(profile).resolve()


def _interactive(args) -> bool:
    return not getattr(args, "headless", False) and sys.stdin.isatty() and sys.stdout.isatty()


def drive(rnd, args) -> int:
    """Run a round under the TUI or the headless reporter; both only render events. Once the round
    has written its record, the files made from it (``reports.export``) are written and said."""
    from .reports.export import export_notice
    from .reports.text import JsonLinesReporter, LineReporter

    if _interactive(args):
        from .tui.app import run_tui
        code = run_tui(rnd)
        if rnd.receipt is not None:         # the screen is gone: the terminal says it
            LineReporter()(export_notice(rnd.sealed or rnd.receipt, rnd.cfg.out_dir))
        return rnd.exit_code if code is None else code
    sink = JsonLinesReporter() if getattr(args, "format", "text") == "jsonl" else LineReporter(verbose=args.verbose)
    follow(rnd, sink)
    if rnd.receipt is not None:
        sink(export_notice(rnd.sealed or rnd.receipt, rnd.cfg.out_dir))
    return int(rnd.exit_code)


def _round(profile: Profile, main, candidate, args, kind: str = "round", resume=None, bundle=None):
    """A round of ``kind`` (round.kinds, by name) of the profile's main against ``candidate``."""
    from .results import lockfile
    from .round import Round, RoundConfig
    out = _results_dir(profile, args)
    cfg = RoundConfig(profile=profile, main=main, candidate=candidate, out_dir=out, runtime=args.runtime,
                      kind=kind, reps=args.reps, lock_path=lockfile.lock_for(profile, out, args.lock),
                      resume=resume, keep_work=args.keep_work, fresh=getattr(args, "fresh", False),
                      rebuild=getattr(args, "rebuild", False), bundle=bundle)
    return Round(cfg)


def _candidate(profile: Profile, given: str | None):
    """--candidate, else the profile's shipped default (engine.candidate)."""
    if given:
        return sources.parse_spec(given, profile.source)
    if profile.candidate:
        text = profile.candidate
        if not text.startswith("pypi:") and "@" not in text:
            text = str((profile.dir / text).resolve())
        return sources.parse_spec(text, profile.source)
    raise UsageError("--candidate is needed for this profile (it names no engine.candidate)",
                     "Give a directory, REPO@REF, pypi:NAME==VERSION or FILE.patch.")


def _check_reps(args) -> None:
    if args.reps is not None and args.reps < 2:
        raise UsageError("--reps must be at least 2", "A single rep is not a measurement.")


def cmd_run(args) -> int:
    _check_reps(args)
    if args.bundle is not None:
        return _run_bundle(args)
    if args.profile is None:
        raise UsageError("--profile is needed (or --bundle DIR, which carries its profile)",
                         "Give a profile file or a shipped profile's name (`console profiles`).")
    profile = load_profile(args.profile)
    main = sources.parse_spec(args.main, profile.source) if args.main else profile.source
    cand = _candidate(profile, args.candidate)
    if args.git_bisect:
        from .bisect.driver import step_profile
        from .bisect.rounds import git_bisect_step
        if isinstance(main, tuple) or isinstance(cand, tuple):
            raise UsageError("--git-bisect judges a tree against a good end: give --main REPO@GOOD and "
                             "--candidate DIR (the checkout git bisect made)", "A patch is not a commit.")
        return git_bisect_step(_bisect_steps(args, _results_dir(profile, args)), step_profile(profile, 1.0), main, cand)
    return drive(_round(profile, main, cand, args), args)


def _run_bundle(args) -> int:
    """A round from a bundle: the bundle is checked against its manifest before anything else,
    then the profile (unless --profile), sdists, model files, reference and base image come from it."""
    from .engine import bundle as bundles
    b = bundles.open_bundle(args.bundle)
    profile = bundles.route(load_profile(args.profile or b.profile_path), b)
    b.took["profile"] = args.profile is None
    if _results_dir(profile, args).is_relative_to(b.root):
        raise UsageError(f"the results directory would be inside the bundle {b.root}, which then no longer "
                         "matches its manifest", "Give --out outside the bundle, or run from another directory.")
    main = sources.parse_spec(args.main, profile.source) if args.main else profile.source
    cand = (sources.parse_spec(args.candidate, profile.source) if args.candidate
            else bundles.candidate_spec(b, profile) or _candidate(profile, None))
    bundles.check_specs(b, {"main": main, "candidate": cand})
    if args.runtime == "docker":
        bundles.load_image(b, profile, lambda line: print(line, flush=True))
    return drive(_round(profile, main, cand, args, bundle=b), args)


def cmd_bundle(args) -> int:
    from .engine import bundle as bundles
    from .engine.wheels import Target
    if args.no_wheels and (args.python_version or args.platform or args.abi or args.console_wheel):
        raise UsageError("--no-wheels leaves the wheels out, so --python-version, --platform, --abi and "
                         "--console-wheel have nothing to choose", "Leave out one or the other.")
    target = None if args.no_wheels else Target(python_version=args.python_version,
                                                platforms=tuple(args.platform), abi=args.abi)
    opts = bundles.Options(candidate=args.candidate or "", target=target, console_wheel=args.console_wheel,
                           image=args.image)
    b = bundles.make(args.profile, args.dir, opts, lambda line: print(line, flush=True))
    for line in bundles.summary(b):
        print(line)
    return ExitCode.OK


def cmd_sweep(args) -> int:
    from .core.decisions.sweep import parse_levels
    from .round import Round, RoundConfig, kinds
    profile = load_profile(args.profile)
    if not profile.serving:
        raise UsageError(f"{profile.path} has no [server] table: a sweep drives an engine's server",
                         "Use a serving profile, e.g. --profile llama-server.")
    if args.blocks < 2:
        raise UsageError("--blocks must be at least 2", "One block per level has no interval.")
    if args.capacity:
        kind = kinds.named("sweep", **_capacity_search(profile, args))
    else:
        if any(getattr(args, k, None) is not None for k in ("budget", "resolution", "alpha")):
            raise UsageError("--budget, --resolution and --alpha set a capacity search", "Add --capacity.")
        try:
            levels = parse_levels(args.concurrency, args.rate, profile.server.concurrency)
        except ValueError as e:
            raise UsageError(f"--concurrency/--rate: {e}", "Give a comma-separated list, e.g. 1,2,4,8.") from None
        kind = kinds.named("sweep", levels=tuple(levels), blocks=args.blocks)
    main = sources.parse_spec(args.main, profile.source) if args.main else profile.source
    out = _results_dir(profile, args)
    cfg = RoundConfig(profile=profile, main=main, candidate=_candidate(profile, args.candidate), out_dir=out,
                      runtime=args.runtime, kind=kind, keep_work=args.keep_work, rebuild=args.rebuild)
    return drive(Round(cfg), args)     # its page is an export of the document (reports.export)


def _capacity_search(profile, args) -> dict:
    """``console sweep --capacity``: the search's options for the sweep kind, or a usage error."""
    from .core.decisions.capacity import check_targets, parse_search
    try:
        check_targets(profile.server.slo or {})
    except ValueError as e:
        raise UsageError(f"{profile.path}: {e}", "Set the targets the capacity is searched for, e.g. "
                         "[server] slo = { ttft_ms = 2000, tpot_ms = 150 }.") from None
    opts = {k: getattr(args, k) for k in ("budget", "resolution", "alpha") if getattr(args, k, None) is not None}
    try:
        search, ends = parse_search(args.concurrency, args.rate, profile.server.concurrency, **opts)
    except ValueError as e:
        raise UsageError(f"--capacity: {e}", "Give the search's two ends, e.g. --rate 0.5,8 or "
                         "--concurrency 1,16.") from None
    return {"levels": ends, "blocks": args.blocks, "capacity": search}


def cmd_demo(args) -> int:
    _check_reps(args)
    profile = load_profile(DEMO_PROFILE)
    if args.runtime == "docker":
        _ensure_base(profile)
    cand = ("patch", str(DEMO_CANDIDATES / f"{args.candidate}.patch"))
    return drive(_round(profile, sources.parse_spec(str(DEMO_MAIN)), cand, args), args)


def cmd_tui(args) -> int:
    from .tui.app import run_tui
    _check_reps(args)
    profile = load_profile(args.profile)
    main = sources.parse_spec(args.main, profile.source) if args.main else profile.source
    if not args.candidate and Path(profile.path) == DEMO_PROFILE.resolve():
        cand = ("patch", str(DEMO_CANDIDATES / "fast.patch"))
    else:
        cand = _candidate(profile, args.candidate)
    if args.runtime == "docker" and Path(profile.path) == DEMO_PROFILE.resolve():
        _ensure_base(profile)
    # A factory: the app opens idle, and each press of s starts a fresh round.
    return run_tui(lambda: _round(profile, main, cand, args), autostart=False)


def cmd_noise(args) -> int:
    _check_reps(args)
    profile = load_profile(args.profile)
    build = sources.parse_spec(args.build, profile.source) if args.build else profile.source
    return drive(_round(profile, build, build, args, kind="noise"), args)


def cmd_resume(args) -> int:
    from .results import store
    from .core.provenance.ledger import find_round
    from .round import Resume, Round, RoundConfig, kinds, spec_from_plan
    resume = Resume.read(args.journal)
    plan = resume.plan
    resumable = sorted(name for name, k in kinds.BY_NAME.items() if k.resumable)
    if plan.get("kind") not in resumable:
        raise UsageError(f"{args.journal} is a {plan.get('kind')}'s journal: only "
                         f"{', '.join(resumable)} rounds are resumed",
                         "Run it again (`console sweep` for a sweep); its builds are reused by their keys.")
    sealed = find_round(store.read_ledger(plan["out_dir"])[0], plan["round_id"])
    if sealed:
        raise UsageError(f"round {plan['round_id']} is already sealed in {plan['out_dir']} "
                         f"(receipt {sealed.id[:12]}, {sealed.outcome})",
                         "A sealed round is never re-run into the ledger; start a new round instead.")
    ended = resume.ended_status()
    if ended in ("complete", "refused"):
        raise UsageError(f"round {plan['round_id']} already ended ({ended})", "Start a new round instead.")
    profile, bundle = load_profile(plan["profile_path"]), None
    main, cand = spec_from_plan(plan["main"]), spec_from_plan(plan["candidate"])
    if plan.get("bundle"):      # checked again: it must still be the bundle the round started from
        from .engine import bundle as bundles
        bundle = bundles.open_bundle(Path(plan["bundle"]))
        profile = bundles.route(profile, bundle)
        bundle.took["profile"] = Path(profile.path).is_relative_to(bundle.root)
        bundles.check_specs(bundle, {"main": main, "candidate": cand})
    lock = Path(plan.get("lock_path") or Path(plan["out_dir"]) / "reference.lock")
    cfg = RoundConfig(profile=profile, main=main, candidate=cand,
                      out_dir=Path(plan["out_dir"]), runtime=plan["runtime"], kind=plan["kind"],
                      reps=plan["reps"], lock_path=lock if lock.exists() else None, resume=resume,
                      fresh=bool(plan.get("fresh")), bundle=bundle)
    args.runtime = plan["runtime"]
    return drive(Round(cfg), args)


def cmd_replay(args) -> int:
    from .reports.replay import FollowSource, ReplaySource, check_replayable
    from .tui.app import run_tui
    if not args.file.exists():
        raise UsageError(f"{args.file} does not exist", "Give a receipt (.json) or a journal (.jsonl).")
    if args.follow and args.file.suffix != ".jsonl":
        raise UsageError(f"--follow reads a journal (.jsonl), not {args.file.name}",
                         "A running round writes results/<profile>/journal/<round>.jsonl.")
    check_replayable(args.file, follow=args.follow)
    if args.follow:
        return run_tui(FollowSource(args.file)) or 0
    return run_tui(ReplaySource(args.file, speed=args.speed)) or 0


# --- verdicts, ledger, lock ------------------------------------------------------

def cmd_verdict(args) -> int:
    from .core.decisions import gate
    from .core.records.verdict import VerdictRecord
    from .reports.export import render
    from .results.saved import read_receipt_file
    from .reports.ledger import verdict_table
    from .reports.matrix import cells_of, matrix_table
    from .reports.text import LineReporter
    f = read_receipt_file(args.receipt, "Give --profile to judge it under a profile's rules, or check it is a "
                                        "console receipt.")
    receipt, identity, ledger_dir = f.receipt, f.identity, f.ledger
    rules = load_profile(args.profile).gate if args.profile else receipt.rules
    v = VerdictRecord.of(gate.decide(receipt, rules))
    fmt = "json" if args.json else args.format
    file_line = (f"file: {args.receipt}: {identity.message}"
                 + (f" (ledger {ledger_dir})" if ledger_dir else ""))
    if fmt == "json":
        print(json.dumps({**v.to_dict(), "file": {**identity.to_dict(), "path": str(args.receipt),
                                        "ledger": str(ledger_dir) if ledger_dir else None}},
                         indent=2, sort_keys=True))
    elif fmt == "table":
        print(LineReporter(colour=None).verdict_text(v))
        print(file_line)
    else:
        tables = [verdict_table(v, str(args.receipt), identity)]
        if cells_of(v):     # a matrix round: its cells too (CSV holds one table: the cells)
            tables.append(matrix_table(v))
        render(tables, fmt, sys.stdout, "matrix" if fmt == "csv" and len(tables) > 1 else None)
    if not identity.sealed:
        print(f"warning: {args.receipt} is not a sealed receipt ({identity.status}): {identity.message}; "
              "the verdict above is re-derived from this file as it stands.", file=sys.stderr)
    stored = receipt.verdict
    said = (stored.outcome.value, stored.tier) if stored else (None, None)
    if not args.profile and said != (v.outcome.value, v.tier):
        print(f"warning: the receipt's stored verdict ({said[0]}, {said[1]}) differs from "
              f"the one re-derived from its measurements; the re-derived one stands.", file=sys.stderr)
    return int(ExitCode.INFRA if v.exit_code is None else v.exit_code)


def cmd_blocks(args) -> int:
    from .reports import serving
    from .reports.export import render, write_results
    from .results.saved import read_receipt_file
    f = read_receipt_file(args.receipt)
    receipt = f.receipt
    if not receipt.profile.server:
        raise UsageError(f"{args.receipt} is not a serving round's receipt (its profile has no [server])",
                         "`console verdict` and `console compare` read any round.")
    render([serving.block_table(receipt)], args.format, sys.stdout)
    if args.save_result:
        _out_dir(args.save_result, "--save-result").mkdir(parents=True, exist_ok=True)
        for path in write_results(args.save_result, receipt, f.identity.receipt_id or ""):
            print(f"wrote {path}", file=sys.stderr)
    return ExitCode.OK


def cmd_compare(args) -> int:
    from .core.provenance.compare import compare
    from .reports.compare import comparison_tables
    from .reports.export import render
    from .results.saved import select_sources
    if args.table and args.format != "csv":
        raise UsageError("--table chooses the table of a CSV export", "Add --format csv, or leave --table out.")
    sources = select_sources(args.sources, node=args.node, since=args.since)
    render(comparison_tables(compare(sources)), args.format, sys.stdout, table=args.table or "speed")
    return ExitCode.OK


def cmd_ledger(args) -> int:
    from .results import store
    from .core.decisions import gate
    if not args.ledger_cmd:
        raise UsageError("say which: `console ledger verify|show|rescore DIR`")
    if not (args.dir / "ledger.jsonl").exists():
        raise UsageError(f"no ledger at {args.dir / 'ledger.jsonl'}", "Give the --out directory of a round.")
    if args.ledger_cmd == "verify":
        problems = store.verify_dir(args.dir)
        for p in problems:
            print(p)
        entries, _ = store.read_ledger(args.dir)
        fatal = [p for p in problems if p.fatal]
        print(f"{len(entries)} sealed round(s), {len(fatal)} problem(s)"
              + (f", {len(problems) - len(fatal)} notice(s)" if len(problems) > len(fatal) else ""))
        return ExitCode.REJECTED if fatal else ExitCode.OK
    if args.ledger_cmd == "show":
        from .reports.export import render
        from .reports.ledger import ledger_table
        entries, _ = store.read_ledger(args.dir)
        render([ledger_table(entries)], args.format, sys.stdout)
        return ExitCode.OK
    profile = load_profile(args.profile)
    rows = store.rescore_dir(args.dir, gate.decide, profile.gate)
    changed = 0
    print(f"{'receipt':12}  {'round':28}  {'sealed as':16}  {'now':16}")
    for r in rows:
        old = f"{r.old_outcome} {r.old_tier or ''}".strip()
        new = f"{r.new_outcome} {r.new_tier or ''}".strip() if not r.error else f"error: {r.error}"
        mark = "  <- changed" if r.changed else ""
        if _under_legacy_rules(r.new_verdict):
            mark += "  (schema 1: fixed-reps rules)"
        changed += bool(r.changed)
        print(f"{r.id[:12]}  {str(r.round_id):28}  {old:16}  {new:16}{mark}")
    print(f"{len(rows)} round(s) re-scored under {profile.path}; {changed} label(s) change; sealed files untouched")
    return ExitCode.OK


def _under_legacy_rules(verdict: dict | None) -> bool:
    """Whether a re-scored verdict (the ledger's row carries its JSON) was decided under schema 1's rules."""
    from .core.records.verdict import VerdictRecord
    return verdict is not None and any(w.code == "legacy-rules" for w in VerdictRecord.from_dict(verdict).warnings)


def cmd_completion(args) -> int:
    import argcomplete
    print(argcomplete.shellcode(["console"], shell=args.shell))
    return ExitCode.OK


def cmd_lock(args) -> int:
    from .results import lockfile, store
    from .core.provenance import lock as lockmod
    from .core.provenance.lock_verify import verify_lock
    if not args.lock_cmd:
        raise UsageError("say which: `console lock verify|show LOCK`")
    if not args.lock.exists():
        raise UsageError(f"no lock file at {args.lock}", "Give the path of a reference.lock.")
    doc = store.read_lock(args.lock)
    lock = lockfile.model(doc, args.lock)
    if args.lock_cmd == "show":
        print(doc.as_string().rstrip("\n"))
        # the nodes, as TOML comments: the output is still the lock
        receipts = store.ledger_receipts(args.ledger) if args.ledger else None
        print("\n# node fingerprints (a round uses only the pins of its own node):")
        print("\n".join(f"# {line}" for line in lockmod.node_lines(lock, receipts)))
        return ExitCode.OK
    if not (args.ledger / "ledger.jsonl").is_file():
        raise UsageError(f"no ledger in {args.ledger}: it holds no ledger.jsonl",
                         "Give --ledger the results directory (--out) of the rounds that raised the lock.")
    ledger_problems = [p for p in store.verify_dir(args.ledger) if p.fatal]
    for p in ledger_problems:
        print(p)
    problems = verify_lock(lock, store.ledger_receipts(args.ledger), file=str(args.lock))
    for p in problems:
        print(p)
    fatal = [p for p in problems if p.fatal] + ledger_problems
    print(f"{len(fatal)} problem(s), {len(problems) - len(fatal) + len(ledger_problems)} notice(s) in {args.lock}")
    return ExitCode.REJECTED if fatal else ExitCode.OK


def cmd_report(args) -> int:
    from .core.decisions import gate
    from .core.records.verdict import VerdictRecord
    from .reports.html import render_html
    from .results.saved import select_sources
    receipts = [s.receipt for s in select_sources(args.files)]     # the same reading as `console compare`
    page = render_html(receipts, [VerdictRecord.of(gate.decide(r, r.rules)) for r in receipts])
    if args.out.is_dir() or args.out.parent.exists() and not args.out.parent.is_dir():
        raise UsageError(f"--out {args.out}: expected a file to write the page to, not a directory "
                         "(or a path under a file)", "Give a file name, e.g. --out report.html.")
    _out_dir(args.out.parent, "--out's folder").mkdir(parents=True, exist_ok=True)
    args.out.write_text(page, encoding="utf-8")
    print(args.out.resolve())
    return ExitCode.OK


# --- images and references ----------------------------------------------------------

def _ensure_base(profile: Profile) -> None:
    from .engine import images
    from .runtime.docker import connect
    client = connect()
    if not images.base_status(client, profile)["present"]:
        print(f"making the pinned base image {profile.image.base} (once; no registry needed)…", flush=True)
        images.bootstrap(client, profile, lambda line: None)


def cmd_images(args) -> int:
    from .engine import images
    from .runtime.docker import connect
    client = connect()
    if args.images_cmd == "bootstrap":
        profile = load_profile(args.profile)
        r = images.bootstrap(client, profile, lambda line: print(line, flush=True), mirror=args.mirror,
                             force=args.force)
        print(f"{profile.image.base}: {r['image_id']}  compiler '{r['compiler']}'"
              + ("" if r["made"] else " (already present)"))
        return ExitCode.OK
    seen = {}
    for img in client.images.list(filters={"label": "bench-console.base"}) + \
            client.images.list(filters={"label": "bench-console"}):
        seen[img.id] = img
    for img in seen.values():
        tags = ", ".join(img.tags) or "<untagged>"
        labels = img.labels or {}
        # engine images inherit the base's labels; the build label is what makes one an engine
        what = f"engine ({labels['bench-console.build']})" if "bench-console.build" in labels else "base"
        print(f"{img.id[:19]}  {what:20}  {tags}  {labels.get('bench-console.compiler', '')}")
    return ExitCode.OK


def cmd_reference(args) -> int:
    from .round import reference
    if args.ref_cmd != "capture":
        raise UsageError("say which: `console reference capture --profile P`")
    profile, sdists = load_profile(args.profile), None
    if args.if_needed and reference.holds_pin(profile):
        print(f"{profile.parity.reference}: the pinned reference is here (sha256 {profile.parity.reference_sha256[:12]}…); nothing to capture")
        return ExitCode.OK
    if args.bundle is not None:
        from .engine import bundle as bundles
        b = bundles.open_bundle(args.bundle)
        # the model from the bundle; the capture writes beside the profile, never into the bundle
        profile, sdists = replace(bundles.route(profile, b), parity=profile.parity), b.sdists
    got = reference.capture(profile, log=lambda line: print(line, flush=True), write_profile=args.write_profile,
                            runtime=args.runtime, sdists=sdists)
    print(f"reference captured: sha256 {got.sha256}")
    if got.reproduces_pin:
        print("identical to the pinned reference")
        return ExitCode.OK
    if args.write_profile:
        return ExitCode.OK
    from .reports.reference import difference_lines
    pin = profile.parity.reference_sha256
    if got.difference is not None:
        for line in difference_lines(got.difference, pin, str(got.compared_with)):
            print(line)
    else:
        print(f"it differs from the pinned reference ({pin[:12]}…); this node holds neither the pinned "
              f"file nor its digest ({got.digest_missing}), so how cannot be said")
    print("the pinned reference is unchanged; to adopt this capture, run again with --write-profile "
          "(replaces the file, the pin and its digest together)")
    return ExitCode.REJECTED


# --- the queue -------------------------------------------------------------------------

def cmd_queue(args) -> int:
    from .queueing import worker as queueing
    from .reports.export import render
    from .core.decisions import queue as policy
    from .core.decisions.queue import State
    from .reports.queue import history_table, queue_table
    from .queueing.store import QueueStore
    from .core.records.untrusted import printable

    if not args.queue_cmd:
        raise UsageError("which queue action?", "submit, ready, approve, cancel, merged, list, show or work.")
    # a line may carry what a submitter wrote (author, source): never terminal controls
    say = lambda line: print("\n".join(map(printable, line.split("\n"))), flush=True)      # noqa: E731
    if args.queue_cmd == "run-job":     # inside a batch job: the queue's file is not opened here
        from .queueing import slurm
        opts = queueing.WorkerOptions(results=args.dir.resolve(), keep_images=args.keep_images,
                                      runtime=args.runtime, reps=args.reps)
        return slurm.run_job(args.spec, args.dir.resolve(), opts, say)
    store = QueueStore(_out_dir(args.dir, "--dir"))
    try:
        action = args.queue_cmd
        if action == "submit":
            row = queueing.submit(store, args.profile, args.source, args.author, args.draft)
            c = row.candidate
            print(f"#{c.id} {c.state.value}: {printable(c.reason)}")
            return {State.REFUSED: ExitCode.REJECTED, State.REVIEW: ExitCode.HELD}.get(c.state, ExitCode.OK)
        if action in ("ready", "approve", "cancel", "merged"):
            row = store.get(args.id)
            to = policy.transition(row.candidate, action)
            extra = {"merged_commit": args.commit} if action == "merged" else {}
            reason = {"ready": "made ready: queued from now", "approve": "cleared by a person: queued in its place",
                      "cancel": "cancelled", "merged": f"merged as {getattr(args, 'commit', '')}"}[action]
            store.move(row.id, to, reason, expect=frozenset({row.candidate.state}), **extra)
            print(f"#{row.id} {to.value}: {reason}")
            if action == "merged":
                for cid in policy.rebased([r.candidate for r in store.rows()], row.id):
                    store.move(cid, State.QUEUED, f"main moved (#{row.id} merged as {args.commit}): measured "
                               "again against the new main", expect=frozenset({State.MERGEABLE}))
                    print(f"#{cid} queued again: its gain was measured against the main before #{row.id}")
            return ExitCode.OK
        if action == "list":
            rows = store.rows()
            render([queue_table(rows, policy.plan([r.candidate for r in rows]))], args.format, sys.stdout)
            return ExitCode.OK
        if action == "show":
            row = store.get(args.id)
            for k, v in row.to_dict().items():
                print(f"{k:14} {printable(str(v))}")
            print()
            render([history_table(store.history(row.id))], "table", sys.stdout)
            return ExitCode.OK
        if action == "work":
            _check_reps(args)
            if args.scheduler == "slurm":
                from .queueing import slurm
                if args.site is None:
                    raise UsageError("--scheduler slurm needs --site FILE", "The site file names the partition.")
                return slurm.work(store, slurm.load_site(args.site), args.dir.resolve(), reps=args.reps,
                                  runtime=args.runtime, keep_images=args.keep_images, once=args.once, say=say)
            opts = queueing.WorkerOptions(results=args.dir.resolve(), keep_images=args.keep_images,
                                          verbose=args.verbose, once=args.once, runtime=args.runtime, reps=args.reps)
            return queueing.work(store, opts, say)
        if action == "watch":
            return _watch_queue(store, args.dir.resolve())
        raise UsageError(f"unknown queue action {action!r}", "See `console queue --help`.")
    except policy.Refusal as e:
        print(f"refused: {e}", file=sys.stderr)
        return ExitCode.REJECTED
    finally:
        store.close()


def _watch_queue(store, directory: Path) -> int:
    """The queue view; Enter on a running candidate opens its round live, q there comes back."""
    from .core.decisions.queue import State
    from .reports.replay import FollowSource
    from .tui.app import run_tui
    from .tui.queue_view import QueueApp, journal_of
    while True:
        chosen = QueueApp(directory).run()
        if chosen is None:
            return ExitCode.OK
        row = store.get(chosen)
        journal = journal_of(row)
        if journal is None or row.candidate.state is not State.RUNNING:
            continue            # it ended or has not started writing yet: back to the queue
        run_tui(FollowSource(journal, alive=lambda: _still_running(directory, chosen)))


def _still_running(directory: Path, cid: int) -> bool:
    """Asked from the viewer's thread: SQLite connections stay in the thread that made them."""
    from .core.decisions.queue import State
    from .queueing.store import QueueStore
    store = QueueStore(directory)
    try:
        return store.get(cid).candidate.state is State.RUNNING
    finally:
        store.close()


def cmd_profiles(args) -> int:
    from .paths import PROFILES, shipped_profiles
    for name in shipped_profiles():
        path = PROFILES / f"{name}.toml"
        try:
            about = load_profile(path).description
        except ProfileError as e:       # a shipped profile that does not load is a bug; say which
            about = f"(does not load: {e})"
        print(f"{name:18} {about}\n{'':18} {path}")
    return ExitCode.OK


def cmd_profile(args) -> int:
    """`profile schema`: the JSON Schema editors check profiles with. `profile check FILE`: the
    profile loads, and nothing is built (a broken one raises ProfileError: exit 2, its message)."""
    from .profile import schema_text
    if args.profile_cmd == "schema":
        sys.stdout.write(schema_text())
        return ExitCode.OK
    if args.profile_cmd != "check":
        raise UsageError("say which: `console profile schema` or `console profile check FILE`")
    p = load_profile(args.profile)
    timed = (f"blocks of {p.server.workload.said} scored by {p.bench.metric} at concurrency "
             f"{p.server.concurrency}" if p.serving else f"bench {p.bench.metric} at depth {p.bench.depth}")
    cells = f", {len(p.matrix.cells)} cells ({', '.join(c.key for c in p.matrix.cells)})" if p.matrix else ""
    print(f"{p.path}: ok: profile '{p.name}', sha256 {p.sha256[:12]}; {timed}{cells}, parity at "
          f"{len(p.parity.depths)} depths, at most {p.gate.max_pairs} pairs")
    return ExitCode.OK


def cmd_cleanup(args) -> int:
    from .runtime.docker import DockerRuntime, remove_engine_images
    rt = DockerRuntime()
    n = rt.cleanup_leftovers(stale_after_s=0)
    print(f"removed {n} container(s) left by the console")
    if args.images:
        gone = remove_engine_images(rt.client, on_kept=lambda image_id, why: print(f"kept {image_id[:19]}: {why}"))
        print(f"removed {gone} engine image(s)")
    return ExitCode.OK


# --- finding the change ----------------------------------------------------------------------------

def cmd_history(args) -> int:
    from .core.statistics import changepoints as cp
    from .core.provenance.alarm import alarm_of
    from .core.provenance.history import series_of
    from .results.saved import select_sources
    try:
        rules = cp.Rules(alpha=args.alpha, min_change=args.min_change, min_segment=args.min_segment)
    except ValueError as e:
        raise UsageError(f"--alpha/--min-change/--min-segment: {e}", "See `console history --help`.") from None
    if args.table and args.format != "csv":
        raise UsageError("--table chooses the table of a CSV export", "Add --format csv, or leave --table out.")
    for d in args.dirs:
        if not d.is_dir():
            raise UsageError(f"{d} is not a directory", "Give results directories (the --out of rounds).")
    if args.html is not None:
        _out_dir(args.html, "--html")
    sources = select_sources(args.dirs)
    found = series_of(sources, rules, metric=args.metric)
    if not found.series:
        raise UsageError("no series of main: " + (found.left_out_sentence() or "no sealed round measured main"),
                         "Give results directories of rounds (`console ledger show DIR` lists them).")
    if args.tui:
        from .tui.history import run_history
        run_history(found, rules)
        return ExitCode.OK
    alarm = alarm_of(found, args.fail_on or "regression")
    culprits = _history_bisect(found, sources, args) if args.bisect else None
    if args.html is not None:
        _history_site(found, rules, alarm, {s.receipt_id: s.receipt for s in sources if s.receipt_id}, args)
    _history_out(found, rules, alarm, culprits, args)
    return ExitCode.REJECTED if args.fail_on and alarm.fired else ExitCode.OK


def _history_out(found, rules, alarm, culprits, args) -> None:
    """The tables (the alarm's and the culprits' with them when asked), or GitHub's annotations."""
    from .reports import history as report
    from .reports.export import render
    if args.format == "github":
        sys.stdout.write(report.annotations(alarm, culprits[0] if culprits else ()))
        return
    tables = report.tables(found, rules)
    if args.fail_on:
        tables.append(report.alarm_table(alarm))
    if culprits is not None:
        tables.append(report.culprit_table(*culprits))
    render(tables, args.format, sys.stdout, table=args.table or "changes")
    if args.format == "table":
        if args.fail_on:
            print("\n" + "\n".join(report.alarm_lines(alarm)))
        if args.html is not None:
            print(f"\nwritten: {args.html / 'index.html'}")


def _history_site(found, rules, alarm, receipts, args) -> None:
    from .core.decisions import gate
    from .core.records.verdict import VerdictRecord
    from .reports.history_site import write_site
    write_site(found, rules, _out_dir(args.html, "--html"), receipts,
               lambda r: VerdictRecord.of(gate.decide(r, r.rules)), alarm if args.fail_on else None)


def _history_bisect(found, sources, args):
    """Every change point history can hand to `console bisect`, bisected in the results directory of
    the round after it; (culprits, change points not bisected and why)."""
    from .bisect.hunt import run_hunts
    from .core.provenance.culprits import hunts
    from .results import store
    _check_reps(args)
    if not 0.0 < args.error_rate < 1.0:
        raise UsageError(f"--error-rate {args.error_rate} is not a rate", "Give a fraction, e.g. 0.05.")
    where: dict[str, Path] = {}
    for d in args.dirs:
        for rid in store.ledger_receipts(d):
            where.setdefault(rid, d.resolve())
    profiles = {s.receipt_id: (s.receipt.profile.path, s.receipt.profile.sha256) for s in sources if s.receipt_id}
    plans, skipped = hunts(found, profiles)

    def one(profile, items, out, runtime):
        return _bisect_run(profile, items, out, runtime, args, interactive=False)

    def said(line: str) -> None:
        print(f"bisect: {line}", flush=True)
    return run_hunts(plans, where.__getitem__, one, said), skipped


def _bisect_steps(args, out: Path, runtime: str | None = None):
    from .bisect.rounds import RoundSteps
    from .reports.text import LineReporter
    return RoundSteps(out, runtime or args.runtime, args.reps, args.fresh, LineReporter(verbose=args.verbose))


def cmd_bisect(args) -> int:
    from .bisect import record as records
    from .bisect.setup import items_of, with_metric
    from .reports import bisect as report
    from .reports.export import render
    if args.show:
        render(report.tables(records.read(args.show).to_dict()), args.format, sys.stdout, table="steps")
        return ExitCode.OK
    _check_reps(args)
    if args.profile is None:
        raise UsageError("--profile is needed to bisect", "Give a profile file or a shipped profile's name.")
    if not 0.0 < args.error_rate < 1.0:
        raise UsageError(f"--error-rate {args.error_rate} is not a rate", "Give a fraction, e.g. 0.05.")
    profile = with_metric(load_profile(args.profile), args.metric)
    items = items_of(profile, args.range, args.good, args.bad)
    out = _results_dir(profile, args)
    rec = _bisect_run(profile, items, out, args.runtime, args, interactive=_interactive(args))
    render(report.tables(rec.to_dict())[:1], args.format, sys.stdout)
    return rec.exit_code


def _bisect_run(profile, items, out: Path, runtime: str, args, interactive: bool):
    """One bisection of ``items`` under ``profile`` into ``out``, live or said line by line; its page
    written beside its record."""
    from .bisect import Bisection, Config
    from .reports import bisect as report
    if runtime == "docker" and Path(profile.path) == DEMO_PROFILE.resolve():
        _ensure_base(profile)
    cfg = Config(profile=profile, items=items, out_dir=out, error_rate=args.error_rate, runtime=runtime,
                 fresh=args.fresh)
    steps = _bisect_steps(args, out, runtime)
    if interactive:
        from .tui.bisect import run_bisect_tui
        rec = run_bisect_tui(cfg, steps)
    else:
        rec = Bisection(cfg, steps, say=lambda line: print(f"bisect: {line}", flush=True)).run()
    page = report.write_html(rec.to_dict(), rec.path(out).with_suffix(".html"))
    print(f"written: {rec.path(out)}, {page}")
    return rec
