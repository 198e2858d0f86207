"""The `console` command: rounds, the demo, images, references, verdicts, provenance.

Every subcommand is a thin shell over the core; errors arrive as one paragraph
that says what happened and what to do, with the documented exit code.
"""
# PYTHON_ARGCOMPLETE_OK  (marks this entry point as answering argcomplete's completion requests)
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .errors import ConsoleError, ExitCode
from .profile import ProfileError

from .paths import DEMO_PROFILE, demo_candidates, profile_arg, version
from .reports.export import FORMATS


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="console",
        description="Benchmark console for inference engines: builds main and a candidate from scratch, "
                    "checks parity first, times interleaved reps, adds pairs until the outcome is decided at "
                    "stated error rates, and seals a receipt anyone can re-derive. Outcomes: accepted (with "
                    "a tier), none (no change of gate.min_gain or more either way, at the stated error "
                    "rates), slower, rejected (parity, claims, guards, protected paths), undecided (the "
                    "budget ran out first), infra (the node or its tooling failed); see docs/DECIDING.md.",
        epilog="Exit codes: 0 accepted, none or undecided; 1 rejected, or slower (0 with gate.slower = "
               "\"record\"); 2 usage or profile error; 3 infra: infrastructure failure (retry, never a "
               "regression); 4 held for review (implausible, or parity uncheckable); 130 interrupted.")
    ap.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")
    for add in (_round_commands, _bundle_command, _find_commands, _saved_round_commands, _image_and_reference_commands,
                _ledger_and_lock_commands, _queue_commands, _profile_commands, _other_commands):
        add(sub)
    return ap


def _round_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--headless", action="store_true", help="progress lines instead of the live console")
    p.add_argument("--out", type=Path, help="results directory: receipts, ledger, journal "
                   "(default ./results/<profile> under the current directory)")
    p.add_argument("--runtime", choices=["docker", "local"], default="docker",
                   help="docker (default) or local processes for nodes that forbid Docker")
    p.add_argument("--reps", type=int,
                   help="timed pairs at most: a round stops earlier once decided (default: the profile's "
                        "gate.max_pairs; a noise round runs bench.reps pairs)")
    p.add_argument("--lock", type=Path, help="reference.lock to read pins from and update (raise-only)")
    p.add_argument("--format", choices=["text", "jsonl"], default="text", help="headless output format")
    p.add_argument("--verbose", "-v", action="store_true", help="also print build log lines")
    p.add_argument("--keep-work", action="store_true", help="keep the round's work directory")
    p.add_argument("--fresh", action="store_true", help="measure again although earlier rounds of the same "
                   "candidate against the same main decided it: pool nothing with them")
    p.add_argument("--rebuild", action="store_true", help="build main and the candidate again even where "
                   "this node has an image of the same build key; a rebuild that does not reproduce the "
                   "recorded engine files is reported with the files that differ")


def _round_commands(sub) -> None:
    p = sub.add_parser("run", help="run a round: main vs candidate on one profile")
    p.add_argument("--git-bisect", action="store_true",
                   help="judge one commit for `git bisect run`: a bisection step (reads and raises no pins) of "
                        "--candidate against --main as the good end; exit 0 like good (none), 1 like bad (slower), "
                        "125 cannot tell (build or parity failed, undecided), 128 the node failed (stops git bisect)")
    p.add_argument("--profile", type=profile_arg, metavar="PROFILE",
                   help="a profile file, or a shipped profile's name (see `console profiles`); with --bundle, "
                        "default the bundle's")
    p.add_argument("--main", help="main's source: DIR, REPO@REF (default: the profile's engine.source)")
    p.add_argument("--candidate", help="candidate's source: DIR, REPO@REF, pypi:NAME==VERSION or FILE.patch "
                   "over main (default: the bundle's candidate, else the profile's engine.candidate)")
    p.add_argument("--bundle", type=Path, metavar="DIR",
                   help="run from a bundle (`console bundle`) with no network: checked against its manifest "
                        "first; the profile, sdists, model files and reference come from it, pip is never called")
    _round_opts(p)

    p = sub.add_parser("sweep", help="a serving profile's two servers over load levels: the throughput-latency "
                       "curve with intervals (measures, decides nothing)")
    p.add_argument("--profile", required=True, type=profile_arg, metavar="PROFILE",
                   help="a serving profile (one with a [server] table), e.g. llama-server")
    p.add_argument("--main", help="main's source (default: the profile's engine.source)")
    p.add_argument("--candidate", help="candidate's source (default: the profile's engine.candidate)")
    level = p.add_mutually_exclusive_group(required=True)
    level.add_argument("--concurrency", metavar="C,C,...", help="closed-loop levels: requests in flight, e.g. 1,2,4,8")
    level.add_argument("--rate", metavar="R,R,...", help="open-loop levels: Poisson arrivals per second, e.g. "
                       "0.5,1,2 (in flight at most the profile's server.concurrency)")
    p.add_argument("--blocks", type=int, default=4, help="pairs of blocks per level (default 4; at least 2)")
    p.add_argument("--capacity", action="store_true",
                   help="search for each build's capacity at the profile's server.slo instead of listing levels: "
                        "--rate LOW,HIGH or --concurrency LOW,HIGH gives the ends, the levels between are bisected, "
                        "and the change in capacity is decided (docs/CAPACITY.md)")
    p.add_argument("--budget", type=int, metavar="N", help="with --capacity: the most levels measured (default 8)")
    p.add_argument("--resolution", type=float, metavar="R",
                   help="with --capacity: stop once each capacity is bracketed within this ratio (default 1.25)")
    p.add_argument("--alpha", type=float, metavar="A",
                   help="with --capacity: the rate of any wrong call over the whole search (default 0.05)")
    _round_opts(p)

    p = sub.add_parser("demo", help="a round on the embedded demo engine (no GPU needed)")
    p.add_argument("--candidate", default="fast", choices=demo_candidates() or None,
                   help="which demo candidate (a patch in images/demo-candidates/; default fast)")
    _round_opts(p)

    p = sub.add_parser("tui", help="open the live console idle on a profile; press s to start a round")
    p.add_argument("--profile", type=profile_arg, default=DEMO_PROFILE)
    p.add_argument("--main", help="main's source (default: the profile's engine.source)")
    p.add_argument("--candidate", help="candidate's source (default for the demo profile: the fast patch)")
    _round_opts(p)

    p = sub.add_parser("noise", help="measure this node's noise: one build against itself, interleaved")
    p.add_argument("--profile", required=True, type=profile_arg)
    p.add_argument("--build", help="the build's source (default: the profile's engine.source)")
    _round_opts(p)

    p = sub.add_parser("resume", help="continue an interrupted round from its journal")
    p.add_argument("journal", type=Path)
    p.add_argument("--headless", action="store_true")
    p.add_argument("--format", choices=["text", "jsonl"], default="text")
    p.add_argument("--verbose", "-v", action="store_true")


def _bundle_command(sub) -> None:
    p = sub.add_parser("bundle", help="gather everything a round of a profile needs into DIR, for a node "
                       "without network (docs/OFFLINE.md)")
    p.add_argument("dir", type=Path, metavar="DIR", help="a new (or empty) directory")
    p.add_argument("--profile", required=True, type=profile_arg, metavar="PROFILE",
                   help="a profile file, or a shipped profile's name")
    p.add_argument("--candidate", help="the candidate to carry: pypi:NAME==VERSION, FILE.patch or DIR "
                   "(default: the profile's engine.candidate)")
    p.add_argument("--python-version", metavar="X.Y", default="",
                   help="the node's Python, for the wheels (default: this interpreter's)")
    p.add_argument("--platform", action="append", default=[], metavar="TAG",
                   help="the node's platform tag for the wheels, e.g. manylinux2014_x86_64 (repeatable; "
                        "default: this machine's)")
    p.add_argument("--abi", default="",
                   help="the node's ABI tag, e.g. cp312 (default: derived from --python-version)")
    p.add_argument("--no-wheels", action="store_true",
                   help="leave out the console's wheels (the node already has this console installed)")
    p.add_argument("--console-wheel", type=Path, metavar="FILE",
                   help="the console's own wheel, when this console is not a checkout to build it from")
    p.add_argument("--image", action="store_true",
                   help="also `docker save` the profile's base image, for a node with Docker but no registry")


def _find_commands(sub) -> None:
    p = sub.add_parser("history", help="main's series over sealed rounds, per node, profile, metric and depth, "
                       "with change points at a stated false-alarm rate (docs/HISTORY.md)")
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="results directories (their ledgers)")
    p.add_argument("--alpha", type=float, default=0.01,
                   help="chance of any change point in any series when nothing changed; each series is searched at alpha / series (default 0.01)")
    p.add_argument("--min-change", type=float, default=0.02,
                   help="smallest change worth a change point, as a fraction (default 0.02)")
    p.add_argument("--min-segment", type=int, default=4, help="rounds at least on each side of a change (default 4)")
    p.add_argument("--metric", help="only series of this metric")
    p.add_argument("--format", choices=(*FORMATS, "github"), default="table",
                   help="table, md, csv (--table picks which), json, or github (the alarm as GitHub Actions "
                        "annotations)")
    p.add_argument("--table", choices=["series", "changes", "points", "alarm", "culprits"],
                   help="with --format csv: which table (default changes)")
    p.add_argument("--fail-on", choices=["regression", "change"],
                   help="exit 1 when the newest segment of a watched series is decidedly worse than the one "
                        "before (regression), or differs either way (change); alpha holds over all series")
    p.add_argument("--bisect", action="store_true",
                   help="bisect every change point whose sides are commits or releases, reusing the ledger's "
                        "builds and decided steps, and name the culprit")
    p.add_argument("--error-rate", type=float, default=0.05,
                   help="with --bisect: chance that one bisection errs (default 0.05)")
    p.add_argument("--reps", type=int, help="with --bisect: pairs per step (default: the profile's)")
    p.add_argument("--fresh", action="store_true", help="with --bisect: measure decided steps again")
    p.add_argument("-v", "--verbose", action="store_true", help="with --bisect: every event of every step")
    p.add_argument("--html", type=Path, metavar="DIR", help="also write a static site: a plot per series, each "
                   "round linked to its receipt's page")
    p.add_argument("--tui", action="store_true", help="browse the series and change points in the terminal")

    p = sub.add_parser("bisect", help="find the first commit or release that changed speed: each step a round "
                       "decided at stated rates, builds reused by key (docs/HISTORY.md)")
    p.add_argument("range", nargs="?", metavar="RANGE",
                   help="REPO@GOOD..BAD (commits on BAD's first-parent line) or pypi:NAME==GOOD..BAD (releases); "
                        "or give --good and --bad")
    p.add_argument("--profile", type=profile_arg, metavar="PROFILE", help="the profile each step's round runs "
                   "(needed unless --show)")
    p.add_argument("--good", help="the good end: REPO@REF, pypi:NAME==VERSION or DIR")
    p.add_argument("--bad", help="the bad end (same repository or package as --good: the range between them)")
    p.add_argument("--metric", help="the metric to bisect (default the profile's bench.metric)")
    p.add_argument("--error-rate", type=float, default=0.05,
                   help="chance that the whole bisection errs; split evenly over its planned steps (default 0.05)")
    p.add_argument("--show", type=Path, metavar="RECORD", help="print a bisection record (OUT/bisect/ID.json) "
                   "in --format instead of running one")
    p.add_argument("--format", choices=FORMATS, default="table", help="the summary's format at the end")
    p.add_argument("--headless", action="store_true", help="progress lines instead of the live console")
    p.add_argument("--out", type=Path, help="results directory (default ./results/<profile>)")
    p.add_argument("--runtime", choices=["docker", "local"], default="docker")
    p.add_argument("--reps", type=int, help="timed pairs at most per step (default: the profile's gate.max_pairs)")
    p.add_argument("--fresh", action="store_true", help="measure every step again instead of reading earlier "
                   "steps' decisions (builds are still reused by key)")
    p.add_argument("--verbose", "-v", action="store_true", help="also print build log lines")


def _saved_round_commands(sub) -> None:
    p = sub.add_parser("replay", help="play a sealed receipt or a journal back through the live console")
    p.add_argument("file", type=Path)
    p.add_argument("--speed", type=float, default=1.0, help="1 = real pace, 10 = ten times faster, 0 = instant")
    p.add_argument("--follow", "-f", action="store_true",
                   help="a journal still being written: show the round live as it goes (another terminal, "
                        "a headless or queued round); leaving does not stop the round")

    p = sub.add_parser("verdict", help="re-derive the verdict of a receipt from its raw numbers, and say "
                       "whether the file is a sealed receipt")
    p.add_argument("receipt", type=Path)
    p.add_argument("--profile", type=profile_arg, help="judge under this profile's current rules instead of the receipt's")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="table (the verdict as sentences), md, csv (one row) or json (the whole verdict)")
    p.add_argument("--json", action="store_true", help="the same as --format json")

    p = sub.add_parser("blocks", help="a serving round's blocks (TTFT, ITL, throughput per block), and each "
                       "build's timed requests as vLLM-style result files")
    p.add_argument("receipt", type=Path)
    p.add_argument("--format", choices=FORMATS, default="table", help="table, md, csv or json")
    p.add_argument("--save-result", type=Path, metavar="DIR",
                   help="also write DIR/<round>-<build>.json per build, with the field names of "
                        "`vllm bench serve --save-result` (docs/SERVING.md)")

    p = sub.add_parser("compare", help="compare saved rounds: receipts or results directories (ledgers)")
    p.add_argument("sources", nargs="+", type=Path, metavar="RECEIPT|DIR",
                   help="receipt files, or results directories whose every sealed round is compared; "
                        "the first round is the baseline")
    p.add_argument("--node", help="only rounds on this node (host name or the profile's node class)")
    p.add_argument("--since", help="only rounds sealed on or after this date (YYYY-MM-DD or an ISO time, UTC)")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--table", choices=["rounds", "speed", "parity"],
                   help="with --format csv: which table (default speed); the other formats hold all three")

    p = sub.add_parser("report", help="a self-contained HTML report of a round, or a comparison of rounds")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE",
                   help="a receipt (.json), or a results directory (every receipt its ledger sealed)")
    p.add_argument("--out", type=Path, default=Path("report.html"), help="the page to write (default report.html)")


def _image_and_reference_commands(sub) -> None:
    p = sub.add_parser("images", help="base images: list, or bootstrap one without a registry")
    isub = p.add_subparsers(dest="images_cmd", metavar="ACTION")
    b = isub.add_parser("bootstrap", help="make the profile's pinned base with debootstrap and import it")
    b.add_argument("--profile", type=profile_arg, default=DEMO_PROFILE)
    b.add_argument("--mirror", help="Debian mirror URL (default: this machine's apt configuration)")
    b.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    isub.add_parser("list", help="the console's images on this node")

    p = sub.add_parser("reference", help="capture the parity reference")
    rsub = p.add_subparsers(dest="ref_cmd", metavar="ACTION")
    c = rsub.add_parser("capture", help="run the profile's reference engine and store its logits and hash")
    c.add_argument("--profile", type=profile_arg, required=True)
    c.add_argument("--write-profile", action="store_true", help="write the new sha256 into the profile")
    c.add_argument("--if-needed", action="store_true",
                   help="capture only when this node does not hold the pinned reference (absent, or other bytes)")
    c.add_argument("--runtime", choices=["docker", "local"], default="docker",
                   help="build the reference source in its pinned image (docker) or with the host's asserted "
                        "tools (local, for nodes without Docker)")
    c.add_argument("--bundle", type=Path, metavar="DIR",
                   help="take the reference source's sdist and the model files from a bundle (no network)")


def _ledger_and_lock_commands(sub) -> None:
    p = sub.add_parser("ledger", help="the chained ledger of sealed receipts")
    lsub = p.add_subparsers(dest="ledger_cmd", metavar="ACTION")
    x = lsub.add_parser("verify", help="check every receipt and link, and that receipt.json is the newest receipt")
    x.add_argument("dir", type=Path)
    x = lsub.add_parser("show", help="list sealed rounds")
    x.add_argument("dir", type=Path)
    x.add_argument("--format", choices=FORMATS, default="table")
    x = lsub.add_parser("rescore", help="re-derive every verdict under a profile's current rules")
    x.add_argument("dir", type=Path)
    x.add_argument("--profile", type=profile_arg, required=True)

    p = sub.add_parser("lock", help="reference.lock: pins, provenance, staleness")
    ksub = p.add_subparsers(dest="lock_cmd", metavar="ACTION")
    x = ksub.add_parser("verify", help="every non-zero pin must trace to a sealed receipt")
    x.add_argument("lock", type=Path)
    x.add_argument("--ledger", type=Path, required=True, help="the results directory holding the ledger")
    x = ksub.add_parser("show", help="print the lock's pins and the node fingerprint each was measured on")
    x.add_argument("lock", type=Path)
    x.add_argument("--ledger", type=Path, help="the results directory holding the ledger: names the node of "
                                               "pins written before fingerprints, from their receipts")


def _queue_dir(x: argparse.ArgumentParser) -> None:
    x.add_argument("--dir", type=Path, default=Path("results"),
                   help="the results directory holding queue.sqlite; rounds go to DIR/<profile> "
                        "(default ./results)")


def _queue_commands(sub) -> None:
    p = sub.add_parser("queue", help="a queue of candidates: submit, list, and a worker that runs their "
                       "rounds in turn (SQLite in the results directory, no server)")
    qsub = p.add_subparsers(dest="queue_cmd", metavar="ACTION")
    x = qsub.add_parser("submit", help="add a candidate (refused at once, with the reason, if it cannot be scored)")
    x.add_argument("source", metavar="SRC", help="a directory, REPO@REF, pypi:NAME==VERSION, a .patch over main, "
                   "or a demo candidate's name")
    x.add_argument("--author", required=True, help="who it is from (one open candidate per author)")
    x.add_argument("--draft", action="store_true", help="not booked until `console queue ready ID`")
    x.add_argument("--profile", type=profile_arg, default=DEMO_PROFILE, metavar="PROFILE")
    _queue_dir(x)
    for name, what in (("ready", "make a draft ready: it queues from now"),
                       ("approve", "a person cleared a candidate in review: it queues in its place"),
                       ("cancel", "withdraw a candidate that is not running"),
                       ("show", "one candidate and its history")):
        x = qsub.add_parser(name, help=what)
        x.add_argument("id", type=int)
        _queue_dir(x)
    x = qsub.add_parser("merged", help="record that a mergeable candidate was merged; the other mergeable ones "
                        "are measured again against the new main")
    x.add_argument("id", type=int)
    x.add_argument("--commit", required=True, help="the merge commit")
    _queue_dir(x)
    x = qsub.add_parser("list", help="every candidate, why each waits, conflicts")
    x.add_argument("--format", choices=FORMATS, default="table")
    _queue_dir(x)
    _queue_worker_commands(qsub)


def _queue_worker_commands(qsub) -> None:
    x = qsub.add_parser("work", help="book the next eligible candidate, run its round, record the outcome, repeat")
    x.add_argument("--once", action="store_true", help="one round, then stop")
    x.add_argument("--keep-images", action="store_true",
                   help="keep the engine images of sealed rounds (default: removed; their IDs stay in the receipts)")
    x.add_argument("--runtime", choices=["docker", "local"], default="docker")
    x.add_argument("--reps", type=int, default=None, help="timed pairs at most per round (default: the profile's)")
    x.add_argument("--verbose", "-v", action="store_true")
    x.add_argument("--scheduler", choices=["local", "slurm"], default="local",
                   help="local: rounds run here, one at a time; slurm: each round is an exclusive batch job")
    x.add_argument("--site", type=Path, help="with --scheduler slurm: the site file (partition, python, max_jobs)")
    _queue_dir(x)
    x = qsub.add_parser("watch", help="the queue live in the terminal: waiting (and why), running (with its "
                        "round's progress), finished (with reasons)")
    _queue_dir(x)
    x = qsub.add_parser("run-job", help=argparse.SUPPRESS)     # what a batch job runs
    x.add_argument("spec", type=Path)
    x.add_argument("--runtime", choices=["docker", "local"], default="docker")
    x.add_argument("--reps", type=int, default=None)
    x.add_argument("--keep-images", action="store_true")
    _queue_dir(x)


def _profile_commands(sub) -> None:
    sub.add_parser("profiles", help="the shipped profiles: name, description, file")
    p = sub.add_parser("profile", help="a profile's JSON Schema, or check a profile without building anything")
    psub = p.add_subparsers(dest="profile_cmd", metavar="ACTION")
    psub.add_parser("schema", help="print the JSON Schema of profiles (for editors: see README, \"Profiles\")")
    x = psub.add_parser("check", help="validate a profile: exit 0 and one line, or 2 and what is wrong")
    x.add_argument("profile", type=profile_arg, metavar="FILE",
                   help="a profile file, or a shipped profile's name")


def _other_commands(sub) -> None:
    p = sub.add_parser("completion", help="print the shell completion script: "
                       "eval \"$(console completion bash)\" (zsh, fish likewise)")
    p.add_argument("shell", choices=["bash", "zsh", "fish"])

    p = sub.add_parser("cleanup", help="remove containers a crashed round left behind")
    p.add_argument("--images", action="store_true",
                   help="also remove engine images (receipts keep their IDs; the pinned base stays)")


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    _complete(ap)
    args = ap.parse_args(argv)
    if not args.cmd:
        ap.print_help()
        return ExitCode.USAGE
    try:
        code = int(_dispatch(args, ap))
        sys.stdout.flush()      # inside the try: a reader that left is noticed here, not at exit
        return code
    except BrokenPipeError:
        return _pipe_closed()
    except ProfileError as e:
        print(f"profile error: {e}\nFix the profile and run again; nothing was built.", file=sys.stderr)
        return ExitCode.USAGE
    except ConsoleError as e:
        print(e.paragraph(), file=sys.stderr)
        return int(e.exit_code)
    except KeyboardInterrupt:
        print("interrupted; no container is left behind (`console cleanup` removes any that are).", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as e:  # a bug: say so in one paragraph; BENCH_CONSOLE_DEBUG=1 shows the traceback
        if os.environ.get("BENCH_CONSOLE_DEBUG"):
            raise
        print(f"internal error: {type(e).__name__}: {e}\nThis is a bug in the console, not a finding about "
              "the engine; rerun with BENCH_CONSOLE_DEBUG=1 for the traceback.", file=sys.stderr)
        return ExitCode.INFRA


def _complete(ap: argparse.ArgumentParser) -> None:
    """Answer a shell's completion request (argcomplete sets _ARGCOMPLETE) and exit; else nothing."""
    if "_ARGCOMPLETE" in os.environ:
        import argcomplete
        argcomplete.autocomplete(ap)


def _pipe_closed() -> int:
    """The reader went away (`console verdict --json | head`): stop quietly, as `cat` would.
    stdout is pointed at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + 13     # killed by SIGPIPE, by the shell's convention


def _dispatch(args, ap) -> int:
    from . import commands
    handler = getattr(commands, f"cmd_{args.cmd}")
    return handler(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
