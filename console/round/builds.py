"""The round's builds: the journal's on resume, an image of the same build key, or a new build.

A reused image is named with the round that built it; a new build is labelled with its key and
this round; under --rebuild a build whose key this node built before is checked against that
earlier build's engine files, and the files that differ are said.
"""
from __future__ import annotations


from .. import events as ev
from ..engine import buildkey, sources
from ..errors import ConsoleError, InfraError
from ..runtime.base import BuildResult
from .plan import RoundConfig


class Builder:
    def __init__(self, cfg: RoundConfig, rt, round_id: str, harness, harness_sha256: str | None,
                 emit: ev.Emit, notice: ev.Notify,
                 check_abort: ev.CheckAbort):
        self.cfg, self.rt, self.round_id = cfg, rt, round_id
        self._harness, self._harness_sha256 = harness, harness_sha256
        self._emit, self._notice, self._check_abort = emit, notice, check_abort

    def build(self, name: str, snap: sources.Snapshot) -> BuildResult:
        """The build of ``name``: the journal's on resume, else an image of the same build key this
        node already has (unless --rebuild), else a new build."""
        self._check_abort()
        resume = self.cfg.resume
        built = resume.recorded_build(name, snap.record.get("tree_sha256"), self.rt) if resume else None
        if built is None:
            image = self.cfg.profile.image
            key = buildkey.key_of(self.rt.recipe(image), snap.record["tree_sha256"], image,
                                  self._harness, self._harness_sha256)
            built = None if self.cfg.rebuild else self.rt.find_build(name, key, image)
            if built is None:
                built = self._new_build(name, snap, key)
        reused = buildkey.built_by(built.reused_from)
        self._emit(ev.BuildDone(build=name, image_id=built.image_id, base_image_id=built.base_image_id,
                                compiler=built.compiler, seconds=round(built.seconds, 3), reused_from=reused,
                                key=built.key))
        return built

    def _new_build(self, name: str, snap: sources.Snapshot, key: str) -> BuildResult:
        resume = self.cfg.resume
        self._emit(ev.BuildStarted(build=name, source=snap.record))
        try:
            # Only main's build may write the node's compiler cache, which later builds of main
            # read: a candidate's build commands could write any object under any key.
            built = self.rt.build(name, snap.dir, self.cfg.profile.image,
                                  lambda line: self._emit(ev.BuildLog(build=name, line=line)),
                                  harness=self._harness, key=key, origin=self.round_id,
                                  keep_cache=name == "main")
        except ConsoleError as e:
            self._emit(ev.BuildFailed(build=name, message=e.message, log_tail=getattr(e, "log_tail", [])))
            raise
        recorded = resume.recorded_image(name) if resume else None
        if recorded and resume.reps and built.image_id != recorded:
            # Only a local build can be redone on resume: it must be byte-identical.
            raise InfraError(f"cannot resume: rebuilding {name} gave {built.image_id[:19]}, "
                             f"not the {recorded[:19]} the earlier reps ran", "Run the round again from the start.")
        if built.compiler_cache:
            c = built.compiler_cache
            self._notice("info", "compiler-cache", f"{name}: {c['tool']} reused {c['hits']} of "
                         f"{c['hits'] + c['misses']} compiled objects from earlier builds on this node")
        if self.cfg.rebuild:
            self._check_reproduced(name, built)
        return built

    def _check_reproduced(self, name: str, built: BuildResult) -> None:
        """A rebuild of a key this node built before must give the same engine files; when it does
        not, that is a finding for the receipt, with the files that differ."""
        before = self.rt.find_build(name, built.key, self.cfg.profile.image, not_id=built.image_id)
        if before is None or before.engine_files is None or built.engine_files is None:
            return
        diff = buildkey.diff_files(before.engine_files, built.engine_files)
        of = buildkey.built_by(before.reused_from)
        built.reproduced = {"of": before.image_id, "round": of, **diff.to_dict()}
        if diff.same:
            self._notice("info", "build-reproduced", f"{name}: the rebuild reproduced the engine files of "
                         f"{of}'s build of the same key ({len(built.engine_files)} files)")
        else:
            self._notice("warn", "build-not-reproduced", f"{name}: a rebuild with the same inputs as {of}'s "
                         f"build did not reproduce its engine files: {diff.sentence()}")
