"""A serving profile read by the schema: [server] and bench.mode go together, the scored metric
is one the decision can use, latency guards and targets are known names, and a workload that
cannot be sent is refused before anything is built, naming the key and the line."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from console.errors import UsageError
from console.paths import SERVER_PROFILE
from console.profile import ProfileError, load_profile
from console.round.serving.draw import block_requests, check_workload
from console.core.decisions.sweep import Level

TEXT = SERVER_PROFILE.read_text()




def test_the_shipped_serving_profile_loads_with_its_guards_and_load():
    p = load_profile(SERVER_PROFILE)
    assert (p.bench.mode, p.bench.metric, p.bench.command) == ("serve", "output_tok_s", ())
    assert (p.server.concurrency, p.server.workload.requests, p.server.check.longest) == (4, 8, 512)
    assert [(g.metric, g.max_rise) for g in p.gate.latency] == [("ttft_p99_ms", 0.25), ("itl_p99_ms", 0.25)]
    assert p.record().server["endpoint"] == "/completion"      # the receipt keeps the [server] in force
    assert p.record().server["grade"]["requests"] == 0 and p.server.grade.command[1] == "grade"   # every one
    assert p.server.workload.drawn == 4 and p.server.seed is None


@pytest.mark.parametrize("edit, key, expected", [
    (('mode = "serve"\n', 'mode = "harness"\ncommand = ["/engine/harness"]\n'), "bench.mode", "expected bench.mode = 'serve': a [server] table"),
    (('metric = "output_tok_s"', 'metric = "decode_tok_s"'), "bench.metric", "expected one of output_tok_s, "
     "request_s, stream_tok_s for a serving profile (all higher is better), got 'decode_tok_s'"),
    (('metric = "ttft_p99_ms"', 'metric = "ttft_p95_ms"'), "gate.latency[0].metric", "expected "),
    (('slo = { ttft_ms = 2000', 'slo = { ttft_s = 2'), "server.slo", "unknown target 'ttft_s'"),
    (('output = [16, 16]', 'output = [16, 8]'), "server.workload.output", "expected [low, high] with 1 <= low <= high"),
])
def test_a_broken_serving_profile_names_the_key(variant, edit, key, expected):
    assert edit[0] in TEXT
    with pytest.raises(ProfileError) as e:
        load_profile(variant(TEXT.replace(*edit, 1)))
    assert e.value.key == key and expected in e.value.expected


def test_a_workload_file_with_a_bad_line_is_refused_when_the_profile_is_read(variant, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "Hello", "max_tokens": 8}\n\n{"prompt": [2, 10, -1]}\n')
    text = TEXT.replace('workload = { kind = "random", requests = 8, input = [32, 128], output = [16, 16], drawn = 4 }',
                        f'workload = {{ kind = "file", file = "{prompts}" }}')
    assert text != TEXT
    with pytest.raises(ProfileError) as e:
        load_profile(variant(text))
    assert e.value.key == "server.workload.file"
    assert re.search(rf"{re.escape(str(prompts))}: line 3: .*token", e.value.expected)
    prompts.write_text('{"prompt": "Hello", "max_tokens": 8}\n{"prompt": [2, 10, 11]}\n')
    p = load_profile(variant(text))
    assert [r.max_tokens for r in block_requests(p.server, [2, 3], "s", "timed", 0, Level(4), range(p.parity.vocab))] == [8, 32]


def test_a_workload_longer_than_the_document_is_refused_before_building(variant):
    p = load_profile(variant(TEXT.replace("input = [32, 128]", "input = [32, 4000]")))
    with pytest.raises(UsageError) as e:
        check_workload(p)
    assert "key 'server.workload'" in str(e.value) and "longer than the document" in str(e.value)


def test_both_builds_of_a_pair_get_the_same_requests_and_other_pairs_others():
    p = load_profile(SERVER_PROFILE)
    doc = [int(x) for x in Path(p.parity.document).read_text().split()]
    pool = range(p.parity.vocab)
    a, b = (block_requests(p.server, doc, "seed", "timed", k, Level(4), pool) for k in (0, 1))
    assert a == block_requests(p.server, doc, "seed", "timed", 0, Level(4), pool) and a != b
    assert a != block_requests(p.server, doc, "another seed", "timed", 0, Level(4), pool)
    assert all(r.prompt[0] == doc[0] and 32 <= r.input_tokens <= 128 and r.max_tokens == 16 for r in a)
    arrivals = block_requests(p.server, doc, "seed", "timed", 0, Level(4, 2.0), pool)
    assert [r.prompt for r in arrivals] == [r.prompt for r in a] and arrivals[-1].at_s > arrivals[0].at_s > 0


def test_a_fixed_workload_seed_is_refused(variant):
    with pytest.raises(ProfileError) as e:
        load_profile(variant(TEXT.replace("concurrency = 4\n", "concurrency = 4\nseed = 0\n", 1)))
    assert e.value.key == "server.seed" and "draws its timed workload's seed" in e.value.expected
