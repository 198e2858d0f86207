"""A round's life as a worker thread: its events queued for whoever iterates ``events()`` and
journaled (fsync'd) as they happen, Ctrl-C and ``abort()``, and an end that always comes (a
``RoundEnded`` event, the journal closed, the work directory removed), however the stages ended.
What the round does is ``runner.Round``'s; this is only how it runs."""
from __future__ import annotations

import abc
import queue
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Iterator

from .. import events as ev
from ..core.records.receipt import Receipt
from ..core.records.verdict import unsealed_status
from ..errors import ConsoleError, ExitCode, Interrupted
from ..results import journal
from .plan import RoundConfig


class Lifecycle(abc.ABC):
    """The thread, queue and journal of a round; subclasses give ``_run`` (the stages),
    ``_stop_running`` (what abort stops at once) and ``_clean_up`` (what the end releases)."""

    def __init__(self, cfg: RoundConfig, round_id: str):
        self.cfg = cfg
        self.round_id = round_id
        self._q: queue.Queue = queue.Queue()
        self._abort = threading.Event()
        self.receipt: dict | None = None        # the receipt as sealed (or a sweep's document)
        self.sealed: Receipt | None = None      # the sealed receipt, read back once (frozen)
        self.receipt_path: Path | None = None
        self.exit_code: int = ExitCode.INFRA
        self._journal: journal.Journal | None = None
        self._worker: threading.Thread | None = None

    @abc.abstractmethod
    def _run(self, work: Path) -> tuple[str, str]:
        """The stages; (status, message) of how they ended."""

    def _stop_running(self) -> None:
        """Stop what runs now (a rep's container, a block's server)."""

    def _clean_up(self) -> None:
        """Release what the round holds (its containers, its servers)."""

    def abort(self) -> None:
        """Thread-safe: end the round as incomplete, stopping what it runs now."""
        self._abort.set()
        self._stop_running()

    def wait(self, timeout: float) -> None:
        """Wait for the round's worker to finish its cleanup (after an abort)."""
        if self._worker is not None:
            self._worker.join(timeout=timeout)

    def events(self) -> Iterator[ev.Event]:
        """Yield the round's events until it ends. Ctrl-C here aborts the round,
        which still ends with a RoundEnded event; a second Ctrl-C gives up waiting."""
        worker = self._worker = threading.Thread(target=self._work, name=f"round-{self.round_id}", daemon=True)
        worker.start()
        interrupts = 0
        while True:
            try:
                item = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            except KeyboardInterrupt:
                interrupts += 1
                self.abort()
                if interrupts > 1:
                    raise
                continue
            if item is None:
                break
            yield item
        worker.join(timeout=30)

    # --- plumbing ------------------------------------------------------------

    def emit(self, e: ev.Event) -> None:
        if self._journal is not None:
            self._journal.append(e)
        self._q.put(e)

    def notice(self, level: str, code: str, message: str) -> None:
        self.emit(ev.Notice(level=level, code=code, message=message))

    def check_abort(self) -> None:
        if self._abort.is_set():
            raise Interrupted("the round was interrupted", "Resume it with `console resume JOURNAL`, or run it again.")

    def _work(self) -> None:
        work: Path | None = None
        status, message = "infra", ""
        try:
            work = Path(tempfile.mkdtemp(prefix=f"bench-console-{self.round_id}-"))
            self.cfg.out_dir.mkdir(parents=True, exist_ok=True)
            self._journal = journal.Journal(journal.journal_path(self.cfg.out_dir, self.round_id))
            status, message = self._run(work)
        except ConsoleError as e:
            self.exit_code = e.exit_code
            status = unsealed_status(e.exit_code)
            status = "incomplete" if status == "interrupted" else status   # the round's own word for it
            message = e.paragraph()
            self.notice("error", type(e).__name__, message)
        except Exception as e:  # a bug must still end the round cleanly
            self.exit_code = ExitCode.INFRA
            message = f"internal error: {type(e).__name__}: {e}"
            self.notice("error", "internal", message)
        finally:
            try:
                self._end(status, message, work)
            finally:
                self._q.put(None)

    def _end(self, status: str, message: str, work: Path | None) -> None:
        self._clean_up()
        if self._abort.is_set() and status not in ("complete", "refused"):
            status, self.exit_code = "incomplete", ExitCode.INTERRUPTED
        end = ev.RoundEnded(status=status, exit_code=int(self.exit_code),
                            receipt_path=str(self.receipt_path) if self.receipt_path else None, message=message)
        try:
            self.emit(end)
        except Exception as e:  # a journal that cannot be written must not hang the viewer
            self._q.put(ev.Notice(level="error", code="journal", message=f"journal write failed: {e}"))
            self._q.put(end)
        if self._journal is not None:
            self._journal.close()
            if status == "decided":     # nothing was measured: no journal to resume
                self._journal.path.unlink(missing_ok=True)
        if work is not None and not self.cfg.keep_work:
            shutil.rmtree(work, ignore_errors=True)
