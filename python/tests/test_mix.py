"""lowp.mix: the JSON a user acts on, its rules round-tripping through
lowp.eval, and a recomputation of its choice from its own sensitivity table
(every assignment of a few matrices tried by brute force)."""

import itertools
import math
import os

import pytest

import lowp

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
MODEL = os.path.join(DATA, "stories3M-hf")
SMALL = dict(model=MODEL, types=["q4_K", "q6_K", "q8_0"], tune_sample=(2, 32), sample=(2, 48),
             baselines=["Q4_K_M", "Q6_K"], threads=2)


@pytest.fixture(scope="module")
def result():
    return lowp.mix(bits_per_weight=5.5, random_mixes=4, **SMALL)


def test_fields(result):
    assert len(result["rules"]) == 29
    assert all(set(r) == {"pattern", "scheme"} for r in result["rules"])
    assert result["bytes"] <= result["budget_bytes"]
    assert result["bits_per_weight"] == pytest.approx(8 * result["bytes"] / result["weights"])
    for key in ("kl_mean", "top1_agreement", "perplexity"):
        assert math.isfinite(result["measured"][key])
    assert [b["recipe"] for b in result["baselines"]] == ["Q4_K_M", "Q6_K"]
    for b in result["baselines"]:
        assert {"recipe", "bits_per_weight", "kl_mean", "top1_agreement", "perplexity"} <= set(b)
    assert result["prediction"]["random_mixes"] == 4
    assert -1 <= result["prediction"]["spearman"] <= 1


def test_rules_round_trip_through_eval(result):
    weights = ",".join(f"{r['pattern']}={r['scheme']}" for r in result["rules"])
    assert weights == result["weights_option"]
    e = lowp.eval(model=MODEL, sample=(2, 48), weights=[weights], threads=2)
    assert e["candidates"][0]["kl_mean"] == result["measured"]["kl_mean"]


def test_prediction_is_the_sum_of_the_sensitivities(result):
    table = {s["tensor"]: s for s in result["sensitivity"]}
    total = sum(table[r["pattern"]]["kl_mean"][r["scheme"]] for r in result["rules"])
    assert result["predicted"]["kl_mean"] == pytest.approx(total, rel=1e-12)
    size = sum(table[r["pattern"]]["bytes"][r["scheme"]] for r in result["rules"])
    assert size == result["bytes"]


def test_choice_is_optimal_among_brute_force():
    """With two types, over four matrices left free (the rest fixed at the
    mix's own choice), no assignment within the budget predicts less."""
    r = lowp.mix(bits_per_weight=6, **dict(SMALL, types=["q4_K", "q8_0"], baselines="none"))
    table = {s["tensor"]: s for s in r["sensitivity"]}
    chosen = {x["pattern"]: x["scheme"] for x in r["rules"]}
    free = list(chosen)[1:5]
    fixed_kl = sum(table[t]["kl_mean"][s] for t, s in chosen.items() if t not in free)
    fixed_bytes = sum(table[t]["bytes"][s] for t, s in chosen.items() if t not in free)
    best = min(
        sum(table[t]["kl_mean"][s] for t, s in zip(free, pick))
        for pick in itertools.product(["q4_K", "q8_0"], repeat=len(free))
        if fixed_bytes + sum(table[t]["bytes"][s] for t, s in zip(free, pick)) <= r["budget_bytes"])
    assert r["predicted"]["kl_mean"] <= fixed_kl + best + 1e-15


def test_errors_name_the_keyword():
    with pytest.raises(ValueError, match="bits_per_weight"):
        lowp.mix(bits_per_weight=40, **SMALL)
    with pytest.raises(ValueError, match="types: bogus"):
        lowp.mix(bits_per_weight=5, **dict(SMALL, types=["bogus"]))
    with pytest.raises(ValueError, match="would store it as"):
        lowp.mix(bits_per_weight=5, **dict(SMALL, model=os.path.join(DATA, "stories260K-hf")))
    with pytest.raises(TypeError, match="bogus"):
        lowp.mix(bits_per_weight=5, bogus=1)


def test_device_budget_and_plan_mix():
    # What a 2.0045 GB device leaves beside a 256-token job and 2 GB of
    # buffers: the same budget from lowp.mix(device=...) and plan(mix=True).
    job = dict(device="toy:2.0045GB", seq=256)
    mixed = lowp.mix(baselines="none", **job, **{k: v for k, v in SMALL.items() if k != "baselines"})
    d = mixed["device"]
    assert d["capacity_bytes"] == 2_004_500_000
    assert d["matrices_bytes"] == d["capacity_bytes"] - d["other_bytes"]
    assert mixed["budget_bytes"] == d["matrices_bytes"]
    assert mixed["bytes"] <= mixed["budget_bytes"]
    plan = lowp.plan(model=MODEL, mode="inference", seq=256, device=[job["device"]],
                     formats=["q8_0"], mix=True, mix_types=SMALL["types"],
                     mix_tune_sample="2:32", eval_sample="2:48", threads=2)
    m = plan["mix"]["devices"][0]
    # The plan's KV cache is bf16, the same 2 bytes as fp16: the same room.
    assert m["budget_bytes"] == d["matrices_bytes"]
    assert m["per_device_bytes"] <= m["capacity_bytes"]
    # The same tuning tokens and budget: the same mix.
    assert m["weights_option"] == mixed["weights_option"]
    with pytest.raises(ValueError, match="mix"):
        lowp.plan(model="llama-3.1-8b", mode="pretrain", formats=["bf16"], mix=True)
