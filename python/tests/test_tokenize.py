"""lowp's tokenizers against independent encoders on whole real texts, and
`lowp.eval(text=...)`'s perplexity protocol against a computation by hand.

- tokenizer.model: Debian's python3-sentencepiece on Llama 2's tokenizer over
  the whole TinyStories and wikitext files (every id equal). Without the
  module these skip, unless LOWP_REQUIRE_SENTENCEPIECE=1.
- tokenizer.json: the known answers transformers.js produced
  (tests/data/tokenizers/known-answers.json, how in tests/tokenizer_oracle/)
  on whole files; tests/tokenizer_test.cc checks its hard strings.
- The protocol: the reference's cross-entropy over positions ctx/2 .. ctx-2
  of each chunk, from lowp.forward's logits of the chunks made by hand.
"""

import hashlib
import json
import os

import numpy as np
import pytest

import lowp

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
TEXTS = {name: os.path.join(DATA, "text", name)
         for name in ("tinystories-valid-head.txt", "wikitext-2-raw-test.txt")}
LLAMA2 = os.path.join(DATA, "llama2-tokenizer", "tokenizer.model")
KNOWN = os.path.join(DATA, "tokenizers", "known-answers.json")


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def sentencepiece():
    if os.environ.get("LOWP_REQUIRE_SENTENCEPIECE") == "1":
        import sentencepiece as spm
        return spm
    return pytest.importorskip("sentencepiece")


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_sentencepiece_model_equals_python_sentencepiece_on_whole_files(name):
    spm = sentencepiece()
    sp = spm.SentencePieceProcessor(model_file=LLAMA2)
    expected = [sp.bos_id()] + sp.encode(read_text(TEXTS[name]))
    got = lowp.tokenize(text_file=TEXTS[name], tokenizer=LLAMA2)
    assert got["tokenizer"]["kind"] == "sentencepiece"
    assert got["add_bos"] is True
    assert got["tokens"] == len(expected)
    assert got["ids"] == expected


def test_hard_strings_equal_python_sentencepiece():
    spm = sentencepiece()
    sp = spm.SentencePieceProcessor(model_file=LLAMA2)
    for text in ["", " ", "  two  spaces ", "\n\n", "naïve café", "日本語のテキスト", "👍🏽 👨‍👩‍👧",
                 "<s> written </s>", "\t\r\n", "x" * 5000]:
        got = lowp.tokenize(text=text, tokenizer=LLAMA2, add_bos=False)
        assert got["ids"] == sp.encode(text), repr(text)


def known_answers():
    if not os.path.exists(KNOWN):
        pytest.skip("no tokenizer.json known answers in this checkout")
    with open(KNOWN) as f:
        return json.load(f)


def test_tokenizer_json_equals_transformers_js_known_answers():
    # Whole files through the binding here; the hard strings in
    # tests/tokenizer_test.cc (each tokenizer loaded once).
    known = known_answers()
    checked = 0
    for name, tok in sorted(known["tokenizers"].items()):
        path = os.path.join(DATA, "tokenizers", tok["tokenizer_json"])
        for file, case in sorted(tok["files"].items()):
            got = lowp.tokenize(text_file=TEXTS[file], tokenizer=path, add_bos=False)
            ids = got["ids"]
            assert len(ids) == case["count"], (name, file)
            assert ids[:len(case["first"])] == case["first"], (name, file)
            assert ids[len(ids) - len(case["last"]):] == case["last"], (name, file)
            digest = hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes()).hexdigest()
            assert digest == case["ids_sha256"], (name, file)
            checked += 1
        # A special token through parse_special (GPT-2's; text to Llama 2).
        case = next(c for c in tok["strings"] if c["text"] == "<|endoftext|>")
        got = lowp.tokenize(text=case["text"], tokenizer=path, add_bos=False, parse_special=True)
        assert got["ids"] == case["ids"], name
    assert checked == 4


def test_eval_text_follows_llama_cpp_perplexity_protocol_by_hand():
    ctx, chunks = 64, 3
    text = read_text(TEXTS["tinystories-valid-head.txt"])[:20000]
    r = lowp.eval(text=text, ctx=ctx, chunks=chunks, weights=["int8-channel"])
    assert r["text"]["ctx"] == ctx and r["text"]["chunks"] == chunks
    assert r["text"]["scored_from"] == ctx // 2
    # KL and top-1 at positions ctx/2 .. ctx-2, each of which predicts.
    assert r["positions"] == r["predictions"] == chunks * (ctx - 1 - ctx // 2)
    # The chunks by hand: the text's ids (one trailing newline dropped), BOS
    # over the first token of each chunk.
    ids = lowp.tokenize(text=text.removesuffix("\n"))["ids"]
    assert ids[0] == 1 and r["text"]["tokens"] == len(ids)
    tokens = np.array(ids[:chunks * ctx], dtype=np.int32).reshape(chunks, ctx)
    tokens[:, 0] = 1
    logits = lowp.forward(None, tokens).astype(np.float64)
    m = logits.max(axis=-1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(axis=-1, keepdims=True))
    first = ctx // 2
    nll = [-logp[c, t, tokens[c, t + 1]] for c in range(chunks) for t in range(first, ctx - 1)]
    assert r["reference"]["cross_entropy"] == pytest.approx(np.mean(nll), rel=1e-6)
    stats = r["candidates"][0]["llama_cpp"]
    assert stats["count"] == len(nll)
    assert stats["ppl_base"]["value"] == pytest.approx(np.exp(np.mean(nll)), rel=1e-6)
    # llama.cpp's ± : the standard error of the mean nll, times the perplexity.
    sem = np.sqrt((np.mean(np.square(nll)) - np.mean(nll) ** 2) / (len(nll) - 1))
    assert stats["ppl_base"]["uncertainty"] == pytest.approx(np.exp(np.mean(nll)) * sem, rel=1e-5)
    cand = r["candidates"][0]
    assert stats["kld"]["value"] == pytest.approx(cand["kl_mean"], rel=1e-12)
    assert stats["same_top"]["value"] == pytest.approx(cand["top1_agreement"], rel=1e-12)


def test_eval_text_errors_name_the_option():
    with pytest.raises(ValueError, match="ctx"):
        lowp.eval(text="Once upon a time", ctx=2)
    with pytest.raises(ValueError, match="text.*fewer than one chunk"):
        lowp.eval(text="Once upon a time", ctx=512)
    with pytest.raises(ValueError, match="tokenizer"):
        lowp.eval(text="Once upon a time" * 100, ctx=64, tokenizer="/nonexistent/tokenizer.json")


# SentencePiece's own normalization rules, trained here by python3-sentencepiece
# (the real nmt_nfkc and nfkc_cf charsmaps, 238 and 245 KB; identity, none):
# lowp reads and checks the file itself and hands libsentencepiece a
# canonical copy (tokenizer/sentencepiece_model.h). Every id must still be
# the library's on the original file, on text the rules change.
NFKC_LINES = ["Hello world! This is a tiny corpus for SentencePiece.",
              "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ｶﾀｶﾅ half-width katakana.",
              "Café naïve résumé — déjà vu … ﬁ ligature ½ ① ㍻ ﷺ",
              "日本語のテキストも少し入れておきます。"] * 25


@pytest.mark.parametrize("rule", ["nmt_nfkc", "nfkc_cf", "identity"])
def test_trained_charsmaps_equal_python_sentencepiece(rule, tmp_path):
    spm = sentencepiece()
    import io
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(NFKC_LINES), model_writer=model,
                                   vocab_size=120, hard_vocab_limit=False,
                                   character_coverage=1.0, minloglevel=2,
                                   normalization_rule_name=rule,
                                   user_defined_symbols=["<tool>", "</tool>"])
    path = tmp_path / "tokenizer.model"
    path.write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(path))
    texts = NFKC_LINES[:4] + ["", "  two  spaces ", "ﷺ ① ｶﾀｶﾅ ＡＢＣ", "<tool>x</tool>",
                              "\t\u3000\u00a0 x", read_text(TEXTS["tinystories-valid-head.txt"])[:20000]]
    for text in texts:
        got = lowp.tokenize(text=text, tokenizer=path, add_bos=False)
        assert got["ids"] == sp.encode(text), repr(text[:40])


def test_option_errors_name_the_python_keyword(tmp_path):
    # The options a wrong value came from, by their keywords (they were
    # reported as `tokens`, or without the tune_ prefix).
    with pytest.raises(ValueError, match=r"^ctx: sequences of 100000 tokens"):
        lowp.eval(text="Once upon a time" * 10, ctx=100000)
    with pytest.raises(ValueError, match=r"^tokenizer: the tokenizer .* gives token"):
        lowp.eval(text="Once upon a time" * 50, ctx=16, tokenizer=LLAMA2)
    with pytest.raises(ValueError, match=r"^tune_sample: '0:5'"):
        lowp.mix(bits_per_weight=4.5, tune_sample="0:5")
    with pytest.raises(ValueError, match=r"^tune_ctx: sequences of 100000 tokens"):
        lowp.mix(bits_per_weight=4.5, tune_text="Once upon a time", tune_ctx=100000)
    with pytest.raises(ValueError, match=r"^model: .*/typo: no such file or directory"):
        lowp.tokenize(text="x", model=os.path.join(DATA, "stories260K-hf", "typo"))
    no_bos = tmp_path / "tokenizer.json"
    no_bos.write_text('{"model": {"type": "BPE", "vocab": {"x": 0}, "merges": []}}')
    with pytest.raises(ValueError, match=r"^add_bos: the tokenizer .* has no BOS token to add"):
        lowp.tokenize(text="x", tokenizer=no_bos, add_bos=True)
    with pytest.raises(ValueError, match=r"^parse_special: changes nothing"):
        lowp.tokenize(text="x", tokenizer=LLAMA2, parse_special=True)
