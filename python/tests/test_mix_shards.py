"""lowp.mix's sensitivity sweep in shards (shard='I/N', table_out) merged
with tables=: the merged result equals one run's, bit for bit, whatever the
order of the files, predicted (a shard per group) or exact (per candidate);
shards of another sweep are refused naming the field."""
import json
import os

import pytest

import lowp

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
MIX = dict(model=os.path.join(DATA, "stories3M-hf"), bits_per_weight=5.5,
           types=["q4_0", "q8_0", "q6_K"], sample=(2, 64), tune_sample=(1, 64),
           baselines=["Q4_K_M"], random_mixes=3)


def shards(tmp_path, n, **changes):
    paths = []
    for i in range(1, n + 1):
        path = str(tmp_path / f"shard{i}-{len(changes)}.json")
        r = lowp.mix(**{**MIX, **changes}, shard=f"{i}/{n}", table_out=path)
        assert r["shard"] == f"{i}/{n}" and r["table_out"] == path
        paths.append(path)
    return paths


ASAN = "asan" in os.environ.get("LD_PRELOAD", "")


# Under ASan the predicted sweep alone: the exact one's shards take the same
# reader (fuzzed in fuzz.mix_table) and 7 s more there.
EXACT_UNLESS_ASAN = pytest.param("exact", marks=pytest.mark.skipif(
    ASAN, reason="the same shard reader as the predicted sweep's, 7 s under ASan"))


@pytest.mark.parametrize("sensitivity", ["predicted", EXACT_UNLESS_ASAN])
def test_merged_shards_are_one_run_bit_for_bit(tmp_path, sensitivity):
    whole = lowp.mix(**MIX, sensitivity=sensitivity)
    paths = shards(tmp_path, 3, sensitivity=sensitivity)
    # Each entry is in exactly one shard: a predicted group's with all its
    # types (one measured, the probe), an exact candidate alone.
    entries = [json.load(open(p))["kl_mean"] for p in paths]
    groups, types = len(whole["sensitivity"]), len(MIX["types"])
    assert sum(map(len, entries)) == groups * types and min(map(len, entries)) > 0
    measured = sum(e[3] for shard in entries for e in shard)
    assert measured == whole["candidates_measured"]
    assert measured == (groups if sensitivity == "predicted" else groups * types)
    for order in (paths, paths[::-1]):
        assert lowp.mix(**MIX, sensitivity=sensitivity, tables=order) == whole


def test_shards_of_another_sweep_are_refused_naming_the_field(tmp_path):
    paths = shards(tmp_path, 2)
    with pytest.raises(ValueError, match="types"):
        lowp.mix(**{**MIX, "types": ["q4_0", "q8_0"]}, tables=paths)
    with pytest.raises(ValueError, match="tokens"):
        lowp.mix(**{**MIX, "tune_sample": (1, 32)}, tables=paths)
    with pytest.raises(ValueError, match=r"shard 2/2 is missing"):
        lowp.mix(**MIX, tables=paths[:1])
    with pytest.raises(ValueError, match="again"):
        lowp.mix(**MIX, tables=[paths[0], paths[0], paths[1]])
    other = shards(tmp_path, 3, random_mixes=0)  # same sweep, another cut
    with pytest.raises(ValueError, match="shard: one of"):
        lowp.mix(**MIX, tables=[paths[0], other[1]])
    with pytest.raises(ValueError, match="sensitivity: the shard was measured with another "
                                         "sensitivity method"):
        lowp.mix(**MIX, sensitivity="exact", tables=paths)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "lowp-mix-table", "version": 2, "identity": 3}')
    with pytest.raises(ValueError, match="bad.json"):
        lowp.mix(**MIX, tables=[str(bad)])
    with pytest.raises(ValueError, match="table_out"):
        lowp.mix(**MIX, shard="1/2")
    with pytest.raises(ValueError, match="shard"):
        lowp.mix(**MIX, shard="3/2", table_out=str(tmp_path / "x.json"))
    assert not os.path.exists(tmp_path / "x.json")


def test_a_shard_of_another_importance_matrix_is_refused(tmp_path):
    files = []
    for n in (2, 3):
        out = str(tmp_path / f"imatrix{n}.gguf")
        lowp.imatrix(model=MIX["model"], sample=(n, 64), out=out)
        files.append(out)
    opts = {**MIX, "random_mixes": 0, "baselines": "none"}
    table = str(tmp_path / "shard.json")
    lowp.mix(**opts, imatrix=files[0], shard="1/1", table_out=table)
    with pytest.raises(ValueError, match="imatrix: the shard was measured with another importance"):
        lowp.mix(**opts, imatrix=files[1], tables=[table])
    assert lowp.mix(**opts, imatrix=files[0], tables=[table]) == lowp.mix(**opts, imatrix=files[0])
