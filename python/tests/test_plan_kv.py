"""lowp.plan's KV cache study (kv='A,B,...'): each weight format with each
KV cache format, its KL the same as lowp.eval's with those sites on the same
tokens, the Pareto front over bytes and KL, and the same pairs in the JSON,
the CSV and the HTML."""
import csv
import io
import os
import subprocess

import pytest

import lowp

CLI = os.environ.get("LOWP_CLI", "lowp")
DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
MODEL = os.path.join(DATA, "stories260K-hf")
PLAN = dict(model="llama-3.1-8b", mode="inference", device=["h100-sxm", "rtx-4090"], seq=32768,
            formats=["bf16", "q4_0"], kv="bf16,q8_0,q4_0:rotate=hadamard", threads=2)


@pytest.fixture(scope="module")
def plan():
    return lowp.plan(**PLAN, quiet=True)


def test_kl_is_evals_with_the_same_sites(plan):
    k = plan["kv_study"]
    # The evaluated model's whole context (stories260K-hf: 512), 4 sequences.
    assert k["context"] == 512 and k["tokens"] == "sampled 4:512 seed 0"
    e = lowp.eval(model=MODEL, sample=(4, 512), weights=["none", "bf16", "q4_0"],
                  kv=["bf16", "q8_0", "q4_0:rotate=hadamard"], threads=2)
    kl = [c["kl_mean"] for c in e["candidates"]]
    assert [f["end_to_end"]["kl_mean"] for f in k["formats"]] == kl[:3]
    assert [p["end_to_end"]["kl_mean"] for p in k["pairs"]] == kl[3:]
    assert [(p["format"], p["kv"]) for p in k["pairs"]] == [
        (w, kv) for w in ("bf16", "q4_0") for kv in ("bf16", "q8_0", "q4_0:rotate=hadamard")]
    # The formats' own rows are sized with the default cache.
    assert plan["options"]["kv"] == "bf16"


def test_pareto_over_bytes_and_kl(plan):
    pairs = plan["kv_study"]["pairs"]
    size = lambda p: p["weight_bytes"] + p["kv_cache_bytes"]
    kl = lambda p: p["end_to_end"]["kl_mean"]
    smaller = lambda a, b: a < b * (1 - plan["pareto_size_tolerance"])

    def dominates(q, p):  # q smaller beyond the tolerance and as accurate, or as small and better
        if smaller(size(p), size(q)):
            return False
        return kl(q) <= kl(p) if smaller(size(q), size(p)) else kl(q) < kl(p)

    for p in pairs:
        dominated = any(dominates(q, p) for q in pairs if q is not p)
        assert p["pareto"] == (not dominated), (p["format"], p["kv"])
    assert any(p["pareto"] for p in pairs)


def test_devices_context_and_sequences(plan):
    for p in plan["kv_study"]["pairs"]:
        for d in p["devices"]:
            size = lowp.size(model="llama-3.1-8b", mode="inference", device=d["device"],
                             seq=32768, weights=p["format"], kv=p["kv"])
            assert (d["max_seq"], d["max_batch"], d["per_device_bytes"]) == (
                size["max_seq"], size["max_batch"], size["per_device"]["total"])


def test_csv_and_html_carry_the_pairs(tmp_path, plan):
    args = [CLI, "plan", "--model", "llama-3.1-8b", "--mode", "inference", "--device",
            "h100-sxm,rtx-4090", "--seq", "32768", "--formats", "bf16,q4_0", "--kv",
            PLAN["kv"], "--threads", "2", "--quiet"]
    rows = list(csv.DictReader(io.StringIO(subprocess.run(args + ["--csv"], check=True,
                                                          capture_output=True,
                                                          text=True).stdout)))
    kv_rows = [r for r in rows if r["study"] == "kv"]
    assert len(kv_rows) == 6 * 2 and {r["study"] for r in rows} == {"formats", "kv"}
    by = {(r["format"], r["kv_format"], r["device"]): r for r in kv_rows}
    for p in plan["kv_study"]["pairs"]:
        for d in p["devices"]:
            r = by[(p["format"], p["kv"], d["device"])]
            assert int(r["max_seq"]) == d["max_seq"] and int(r["max_batch"]) == d["max_batch"]
            assert float(r["kl_mean"]) == p["end_to_end"]["kl_mean"]
            assert r["pareto"] == ("true" if p["pareto"] else "false")
    html = tmp_path / "plan.html"
    subprocess.run(args + ["--html", str(html)], check=True, capture_output=True)
    text = html.read_text()
    assert text.count("<h3>KV cache formats on ") == 2
    assert "q4_0:rotate=hadamard" in text


def test_errors_name_the_option():
    with pytest.raises(ValueError, match="kv: a KV cache study sizes a served model"):
        lowp.plan(**{**PLAN, "mode": "pretrain", "formats": ["bf16"]})
    with pytest.raises(ValueError, match="kv_sample"):
        lowp.plan(**{**PLAN, "kv": "bf16"}, kv_sample="2:64")
    with pytest.raises(ValueError, match="kv_sample"):
        lowp.plan(**PLAN, kv_sample="2:99999")
