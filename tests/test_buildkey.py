"""Build keys: every input that goes into a build changes the key, nothing else does."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from console.engine.buildkey import BuildInputs, build_key, diff_files, inputs_of
from console.paths import DEMO_PROFILE, LLAMA_PROFILE
from console.profile import load_profile

BASE = BuildInputs(recipe={"runtime": "docker", "base_image_id": "sha256:" + "a" * 64, "recipe_sha256": "b" * 64},
                   tree_sha256="c" * 64, build="make", compiler="gcc 12", compiler_probe=("gcc", "--version"),
                   tools=(("cmake", "cmake 3.25", ("cmake", "--version")),), harness_sha256="d" * 64,
                   harness_build="sh build.sh")


def test_the_key_is_a_sha256_and_stable():
    assert build_key(BASE) == build_key(replace(BASE)) and len(build_key(BASE)) == 64


@given(field=st.sampled_from(["tree_sha256", "build", "compiler", "harness_sha256", "harness_build", "compiler_cache"]),
       text=st.text(min_size=1, max_size=20))
def test_any_changed_input_changes_the_key(field, text):
    changed = replace(BASE, **{field: getattr(BASE, field) + text})
    assert build_key(changed) != build_key(BASE)


@given(part=st.sampled_from(["runtime", "base_image_id", "recipe_sha256"]), text=st.text(min_size=1, max_size=8))
def test_the_runtime_recipe_is_in_the_key(part, text):
    assert build_key(replace(BASE, recipe={**BASE.recipe, part: BASE.recipe[part] + text})) != build_key(BASE)


def test_tools_and_the_probe_are_in_the_key():
    assert build_key(replace(BASE, tools=())) != build_key(BASE)
    assert build_key(replace(BASE, compiler_probe=("cc", "--version"))) != build_key(BASE)


def test_inputs_of_a_profile_with_and_without_a_harness():
    demo, llama = load_profile(DEMO_PROFILE), load_profile(LLAMA_PROFILE)
    recipe = BASE.recipe
    d = inputs_of(recipe, "e" * 64, demo.image, demo.harness, "ignored")
    assert d.harness_sha256 is None and d.harness_build is None and d.build == demo.image.build
    ll = inputs_of(recipe, "e" * 64, llama.image, llama.harness, "f" * 64)
    assert ll.harness_sha256 == "f" * 64 and ll.tools[0] == ("cmake", "cmake version 3.25.1", ("cmake", "--version"))
    assert (d.compiler_cache, ll.compiler_cache) == ("none", "ccache")
    assert build_key(d) != build_key(ll)


def test_diff_names_changed_missing_and_new_files():
    d = diff_files({"engine": "1", "lib/a": "2", "old": "3"}, {"engine": "9", "lib/a": "2", "new": "4"})
    assert (d.changed, d.only_recorded, d.only_rebuilt) == (("engine",), ("old",), ("new",)) and not d.same
    assert d.sentence() == "differ: engine; only in the recorded build: old; only in the rebuild: new"
    same = diff_files({"a": "1"}, {"a": "1"})
    assert same.same and same.sentence() == "the same files" and same.to_dict()["same"] is True


def test_a_long_list_is_cut_with_a_count():
    d = diff_files({f"f{i}": "1" for i in range(9)}, {f"f{i}": "2" for i in range(9)})
    assert d.sentence(limit=3) == "differ: f0, f1, f2 and 6 more"


def test_which_round_built_a_reused_image_is_said_one_way():
    from console.engine.buildkey import built_by
    assert built_by(None) == "" and built_by({}) == ""
    assert built_by({"round": "R1", "image_id": "sha256:x"}) == "R1"
    assert built_by({"round": "", "image_id": "sha256:x"}) == "an earlier round"
