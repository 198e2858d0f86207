"""The live console: renders a round's event stream; decides nothing itself.

``ConsoleApp(source)`` runs ``source.events()`` on a thread worker. Events go
through an :class:`~console.tui.messages.Inbox` and are applied in batches at most
every ``refresh_interval`` seconds, so floods of build-log lines and telemetry
stay cheap. Keys: ``s`` start (when idle), ``a`` abort, ``l`` full log of the
selected build or rep, ``r`` receipt, ``q`` quit.
"""
from __future__ import annotations

import gc
import json
import time
from pathlib import Path
from typing import Any, Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.worker import get_current_worker

from console.events import EventSource

from .messages import EventsPending, Inbox, SourceArg, StreamClosed
from .screens.dashboard import DashboardScreen
from .screens.viewers import LogScreen, ReceiptScreen
from .widgets.builds import BuildPanel
from .widgets.reps import RepTable

EXIT_QUIT_DURING_ROUND = 130   # the viewer left before the round ended (as after Ctrl-C)
REFRESH_INTERVAL = 0.05

LatencyProbe = Callable[[list[float]], None]


class ConsoleApp(App[int]):
    """Dashboard for one round at a time.

    ``source``: an :class:`EventSource` (the round starts at once), a zero-argument
    factory returning one (the app opens idle; ``s`` starts it, and starts a fresh
    round after one ended), or None (nothing to start).
    ``clock``: monotonic seconds for the elapsed-time display (inject a fixed one
    for snapshots). ``latency_probe``: called after each screen refresh with the
    ``perf_counter`` arrival times of the events that refresh made visible.
    """

    CSS_PATH = "console.tcss"
    TITLE = "bench-console"
    BINDINGS = [
        Binding("s", "start", "Start"),
        Binding("a", "abort", "Abort"),
        Binding("l", "show_log", "Log"),
        Binding("r", "receipt", "Receipt"),
        Binding("q", "quit_console", "Quit"),
    ]

    def __init__(self, source: SourceArg, *, title: str = "bench-console",
                 clock: Callable[[], float] = time.monotonic, autostart: bool | None = None,
                 refresh_interval: float = REFRESH_INTERVAL,
                 latency_probe: LatencyProbe | None = None) -> None:
        super().__init__()
        self.title = title
        self._clock = clock
        self._refresh_interval = refresh_interval
        self.latency_probe = latency_probe
        self._factory: Callable[[], EventSource] | None = None
        self._source: EventSource | None = None
        if _is_source(source):
            self._source = source  # type: ignore[assignment]
            self._autostart = True if autostart is None else autostart
        else:
            self._factory = source  # type: ignore[assignment]
            self._autostart = bool(autostart) and source is not None
        self._inbox = Inbox()
        self._last_drain = 0.0
        self._drain_timer: Any = None
        self._awaiting_refresh = False
        self._drain_wanted = False
        self._stream_closed: StreamClosed | None = None  # held until the batch on screen is drawn
        self.running = False
        self.aborting = False
        self.dashboard = DashboardScreen(clock)

    # --- lifecycle -------------------------------------------------------
    def get_default_screen(self) -> DashboardScreen:
        return self.dashboard  # mounted before any event is applied

    def on_ready(self) -> None:
        # The dashboard's first frame is on screen. It renders every widget from scratch: a
        # stream started before it would queue the round's first events behind it.
        if self._autostart:
            self.call_after_refresh(self.action_start)
        elif self._factory is not None:
            self.dashboard.note("info", "idle", "press s to start a round")

    def on_unmount(self) -> None:
        self._inbox.close()
        # The stream's thread must end for the process to exit: stop the round.
        if self.running and self._source is not None and not self.aborting:
            self.aborting = True
            self._source.abort()

    def action_start(self) -> None:
        if self.running:
            self.notify("a round is already running", severity="warning")
            return
        source = self._source
        if source is None or self.dashboard.ended is not None:
            if self._factory is None:
                if source is None:
                    self.notify("nothing to start", severity="warning")
                return
            source = self._factory()
            if self.dashboard.ended is not None:
                # A fresh round gets a fresh dashboard.
                self.dashboard = DashboardScreen(self._clock)
                self.switch_screen(self.dashboard)
        self._source = source
        self.running = True
        self.aborting = False
        _freeze_startup_heap()
        self._pump(source)

    @work(thread=True, exclusive=True, group="stream", exit_on_error=False)
    def _pump(self, source: EventSource) -> None:
        worker = get_current_worker()
        error: str | None = None
        try:
            for event in source.events():
                signal = self._inbox.put(event)
                if signal is not None:
                    self.post_message(EventsPending(urgent=signal == "full"))
                if worker.is_cancelled:
                    break
        except Exception as exc:  # the stream broke; say so instead of dying
            error = f"{type(exc).__name__}: {exc}"
        self.post_message(StreamClosed(error))

    # --- applying events -------------------------------------------------
    def on_events_pending(self, message: EventsPending) -> None:
        self._request_drain(message.urgent)

    def _request_drain(self, urgent: bool) -> None:
        if self._awaiting_refresh:
            # One batch on screen at a time: a flood must not starve the refresh.
            self._drain_wanted = True
            return
        if urgent:
            # The source is waiting on a full inbox: drain now.
            if self._drain_timer is not None:
                self._drain_timer.stop()
            self._drain()
            return
        if self._drain_timer is not None:
            return
        wait = self._last_drain + self._refresh_interval - time.monotonic()
        if wait <= 0:
            self._drain()
        else:
            self._drain_timer = self.set_timer(wait, self._drain)

    def _drain(self) -> None:
        self._drain_timer = None
        self._last_drain = time.monotonic()
        arrivals = self._inbox.drain()
        if not arrivals:
            return
        dash = self.dashboard
        dash.apply_batch(a.event for a in arrivals)
        received = [a.received for a in arrivals]
        self._awaiting_refresh = True
        frames = dash.frames

        def refreshed(retry: bool = True) -> None:
            if retry and dash.frames == frames:
                # Textual runs this as soon as the screen is idle with nothing to redraw, which
                # can be before the batch's widgets (they report on their own idle) have asked
                # to be: wait for the refresh that draws them (once: a batch may change nothing).
                dash.call_after_refresh(refreshed, False)
                return
            self._awaiting_refresh = False
            if self.latency_probe is not None:
                self.latency_probe(received)
            if self._drain_wanted:
                self._drain_wanted = False
                self._request_drain(self._inbox.full)
            if self._stream_closed is not None and not self._awaiting_refresh:
                self.on_stream_closed(self._stream_closed)

        dash.call_after_refresh(refreshed)

    def on_stream_closed(self, message: StreamClosed) -> None:
        if self._awaiting_refresh:
            # The batch on its way to the screen goes first: the last events (a verdict
            # re-lays out the whole screen) would hold up its refresh.
            self._stream_closed = message
            return
        self._stream_closed = None
        self._drain()
        self.running = False
        dash = self.dashboard
        if message.error:
            dash.note("error", "stream-error", message.error)
            dash.header.set_status("stream error")
        elif dash.ended is None:
            dash.note("warn", "stream-ended", "the event stream ended without RoundEnded")
            dash.header.set_status("stream ended")

    # --- keys ------------------------------------------------------------
    def action_abort(self) -> None:
        if not self.running or self._source is None:
            self.notify("no round is running", severity="warning")
            return
        if self.aborting:
            return
        self.aborting = True
        self.dashboard.header.set_status("aborting…")
        self.dashboard.note("warn", "abort", "abort requested; waiting for the round to end")
        self._source.abort()

    def action_show_log(self) -> None:
        dash = self.dashboard
        focused = dash.focused
        if isinstance(focused, RepTable):
            rep = focused.selected_record()
            if rep is not None:
                title = f"rep {rep.build} {rep.phase} #{rep.index} (position {rep.position}, {rep.status})"
                self.push_screen(LogScreen(title, [str(x) for x in rep.log_tail]))
                return
        panel = None
        node = focused
        while node is not None and panel is None:
            panel = node if isinstance(node, BuildPanel) else None
            node = node.parent
        if panel is None:
            panel = dash.build_panel(dash.last_build or "main")
        self.push_screen(LogScreen(f"build log: {panel.build}", panel.lines))

    def action_receipt(self) -> None:
        ended = self.dashboard.ended
        path = ended.receipt_path if ended else None
        if not path:
            self.notify("no receipt yet", severity="warning")
            return
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            self.notify(f"cannot read receipt {path}: {exc}", severity="error")
            return
        self.push_screen(ReceiptScreen(path, data))

    def action_quit_console(self) -> None:
        if self.running and self._source is not None:
            # Leaving mid-round still tears the round down.
            if not self.aborting:
                self.aborting = True
                self._source.abort()
            self.exit(EXIT_QUIT_DURING_ROUND, return_code=EXIT_QUIT_DURING_ROUND)
            return
        ended = self.dashboard.ended
        code = ended.exit_code if ended is not None else 0
        self.exit(code, return_code=code)


_heap_frozen = False


def _freeze_startup_heap() -> None:
    """Take what is alive when the first round starts (imports, the app, its widgets) out of
    the garbage collector's walk: it lives as long as the process, and a full collection
    walking it stalls the screen for 50-100 ms mid-round."""
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.collect()  # so that no garbage is kept for good
        gc.freeze()


def _is_source(obj: Any) -> bool:
    return obj is not None and callable(getattr(obj, "events", None)) \
        and callable(getattr(obj, "abort", None))


def run_tui(source: SourceArg, **kw: Any) -> int:
    """Run the console until the user quits; returns the exit code to use.

    That is the round's ``RoundEnded.exit_code`` when it ended,
    :data:`EXIT_QUIT_DURING_ROUND` when the user left mid-round, else 0.
    """
    app = ConsoleApp(source, **kw)
    result = app.run()
    if isinstance(result, int):
        return result
    return app.return_code or 0
