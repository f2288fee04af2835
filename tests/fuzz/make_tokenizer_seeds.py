#!/usr/bin/python3
"""Writes the seed corpus of the tokenizer_json and sentencepiece fuzz targets
(tests/fuzz/corpus/{tokenizer_json,sentencepiece}/). Each seed is four bytes
(little-endian) giving the file's length, the file, then the text to encode.

The SentencePiece models are trained here by SentencePiece itself (Debian's
python3-sentencepiece 0.1.97, the library lowp links), on a few lines of text
with characters the normalizers change; the charsmaps are therefore real
ones: a small rule table (a custom normalization_rule_tsv, 1 KB: nmt_nfkc's
is 238 KB, beyond the fuzzers' 16 KB inputs) and none (identity). The hostile
seeds are those models with one field changed, by the small protobuf writer
below. Run with Debian's /usr/bin/python3 after changing it; commit the output.
"""
import io
import json
import os
import shutil
import struct
import tempfile

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))

LINES = ["Hello world! This is a tiny corpus for SentencePiece.",
         "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ｶﾀｶﾅ half-width katakana.",
         "Café naïve résumé — déjà vu … ﬁ ligature ½ ① ㍻",
         "日本語のテキストも少し入れておきます。"] * 25
TEXT = "Hello ＡＢＣ １２３, café ① ﬁ  spaces\tand\nlines 日本語 <tool>x</tool>".encode()


def write(target, name, file_bytes, text=TEXT):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(struct.pack("<I", len(file_bytes)) + file_bytes + text)


# --- protobuf, as much as the seeds need --------------------------------------
def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        c, v = v & 0x7F, v >> 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field_varint(number, v):
    return varint(number << 3) + varint(v)


def field_bytes(number, b):
    return varint(number << 3 | 2) + varint(len(b)) + b


def read_varint(b, i):
    """The varint at b[i:] and the index after it."""
    value, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def fields(b):
    """Top-level (number, wire, raw field bytes) of a message."""
    out, i = [], 0
    while i < len(b):
        start = i
        key, i = read_varint(b, i)
        wire = key & 7
        if wire == 0:
            _, i = read_varint(b, i)
        elif wire == 2:
            n, i = read_varint(b, i)
            i += n
        else:
            i += 4 if wire == 5 else 8
        out.append((key >> 3, wire, b[start:i]))
    return out


def piece(text, score=0.0, kind=1):
    return field_bytes(1, field_bytes(1, text) + varint(2 << 3 | 5) + struct.pack("<f", score) +
                       field_varint(3, kind))


def normalizer(charsmap):
    return field_bytes(3, field_bytes(2, charsmap))


# --- hand-built models and charsmaps (darts-clone units) ----------------------
MSB = 0x80000000  # a unit whose label no byte equals: the filler of unused units


def unit(label, offset, has_leaf):
    """A node: its label, the offset to its children's block, a leaf below."""
    if offset < (1 << 21):
        bits = offset << 10
    else:
        bits = ((offset >> 8) << 10) | (1 << 9)
    return bits | (int(has_leaf) << 8) | label


def charsmap_blob(units, replacements):
    trie = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie)) + trie + replacements


def chain(n, leaf=True, cycle=False, value=0):
    """Keys "a", "aa", ... "a"*n (a cycle: "a" leading back to itself), each
    mapped to the replacement at `value`."""
    blocks = 2 if cycle else n + 1
    a = [MSB] * (256 * (blocks + 1))
    a[0] = unit(0, 256, False)  # the root's children start at 256
    for j in range(1 if cycle else n):
        base, child_base = 256 * (j + 1), 256 if cycle else 256 * (j + 2)
        m = base ^ 0x61
        a[m] = unit(0x61, m ^ child_base, leaf)
        a[child_base] = MSB | value  # the leaf's value, at the child's base
    return a


BASE_PIECES = [(b"<unk>", 2), (b"<s>", 3), (b"</s>", 3), ("\u2581".encode(), 1), (b"a", 1),
               (b"b", 1), (b"x", 1), (b"aa", 1)]


def hand_model(pieces=BASE_PIECES, charsmap=None, model_type=1):
    b = b"".join(piece(text, -1.0, kind) for text, kind in pieces)
    b += field_bytes(2, field_varint(3, model_type))
    if charsmap is not None:
        b += normalizer(charsmap)
    return b


def train(**options):
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(LINES), model_writer=buf,
                                   hard_vocab_limit=False, character_coverage=1.0, minloglevel=2,
                                   **options)
    return buf.getvalue()


def sentencepiece_seeds():
    # The rule file's name is kept in the model: a relative one, in a
    # temporary working directory, so the seeds are the same on every run.
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        # NFKC-like rules: fullwidth A, "A B" -> x, a ligature, the ideographic space.
        with open("rules.tsv", "w") as f:
            f.write("FF21\t41\n41 42\t78\nFB01\t66 69\n3000\t20\n")
        rule_unigram = train(vocab_size=100, normalization_rule_tsv="rules.tsv")
        rule_bpe = train(vocab_size=100, model_type="bpe", normalization_rule_tsv="rules.tsv")
        os.chdir(here)
    identity = train(vocab_size=100, normalization_rule_name="identity",
                     user_defined_symbols=["<tool>", "</tool>"])
    byte_bpe = train(vocab_size=340, model_type="bpe", byte_fallback=True,
                     normalization_rule_name="identity", user_defined_symbols=["<tool>"])
    write("sentencepiece", "seed_rules_unigram", rule_unigram)
    write("sentencepiece", "seed_rules_bpe", rule_bpe)
    write("sentencepiece", "seed_identity_user_defined", identity)
    write("sentencepiece", "seed_bpe_byte_fallback", byte_bpe)
    write("sentencepiece", "seed_rules_unigram_empty_text", rule_unigram, b"")
    # Hostile: one field changed (a message given twice is merged, so an
    # appended normalizer_spec replaces the charsmap).
    charsmap = [f for f in fields(rule_unigram) if f[0] == 3]
    garbage = bytes((i * 151 + 7) & 0xFF for i in range(1100))
    write("sentencepiece", "bad_garbage_charsmap", rule_unigram + normalizer(garbage))
    # Garbage units behind a well-formed header (Llama 2's file with such a
    # normalizer merged in crashed libsentencepiece on the first encode).
    units = struct.pack("<I", 1024) + garbage[:1024] + b"zz\0"
    write("sentencepiece", "bad_garbage_units", rule_unigram + normalizer(units))
    self_test = field_bytes(4, field_bytes(1, field_bytes(1, b"Hello") + field_bytes(2, b"x")))
    write("sentencepiece", "bad_garbage_charsmap_self_test",
          rule_unigram + normalizer(garbage) + self_test)
    ns = charsmap[0][2]
    # The charsmap's own bytes, its trie size one too large.
    blob = [f for f in fields(ns[len(varint(3 << 3 | 2)) + len(varint(len(ns))):]) if f[0] == 2]
    if blob:
        raw = blob[0][2]
        body = raw[len(varint(2 << 3 | 2)) + len(varint(len(raw))):]
        size = struct.unpack("<I", body[:4])[0]
        write("sentencepiece", "bad_trie_size_past_end",
              rule_unigram + normalizer(struct.pack("<I", len(body) - 3) + body[4:]))
        # Zeroed units: label 0 children that point to themselves (a cycle on NUL).
        write("sentencepiece", "bad_zeroed_units",
              rule_unigram + normalizer(body[:4] + bytes(size) + body[4 + size:]), b"a\0b")
    write("sentencepiece", "bad_nul_piece", identity + piece(b"\0x"))
    write("sentencepiece", "bad_model_type", identity + field_bytes(2, field_varint(3, 99)))
    write("sentencepiece", "bad_piece_type", identity + piece(b"zz", kind=99))
    nested = b"".join(piece(b"q" * n, kind=4) for n in range(1, 66))
    write("sentencepiece", "bad_user_defined_chain", identity + nested, b"q" * 80)
    write("sentencepiece", "bad_repeated_piece", identity + piece(b"<tool>", kind=3))
    write("sentencepiece", "bad_long_piece", identity + piece(b"y" * 600))
    write("sentencepiece", "bad_not_protobuf", b"\x0a\xff\xff\xff\xff\x7f")
    # Hand-built charsmaps at libsentencepiece's limits: 32 keys matching at
    # once fit NormalizePrefix's stack array, 33 overrun it.
    write("sentencepiece", "valid_chain32", hand_model(charsmap=charsmap_blob(chain(32), b"X\0")),
          b"a" * 100)
    write("sentencepiece", "bad_chain33", hand_model(charsmap=charsmap_blob(chain(33), b"X\0")),
          b"a" * 100)
    write("sentencepiece", "bad_cycle_with_match",
          hand_model(charsmap=charsmap_blob(chain(1, cycle=True), b"X\0")), b"a" * 1000)
    write("sentencepiece", "bad_cycle_without_match",
          hand_model(charsmap=charsmap_blob(chain(1, leaf=False, cycle=True), b"X\0")),
          b"a" * 1000)
    write("sentencepiece", "bad_replacement_outside",
          hand_model(charsmap=charsmap_blob(chain(1, value=0x7FFFFFF0), b"X\0")), b"a")
    write("sentencepiece", "bad_replacement_too_long",
          hand_model(charsmap=charsmap_blob(chain(1), b"Y" * 100 + b"\0")), b"a" * 100)
    # A 1-byte key: 5 spaces (escaped to 3 bytes each) and a letter make 16
    # bytes, the most allowed; 6 spaces make 19.
    write("sentencepiece", "bad_replacement_grows_19_times",
          hand_model(charsmap=charsmap_blob(chain(1), b"      Y\0")), b"a" * 100)
    write("sentencepiece", "valid_replacement_grows_16_times",
          hand_model(charsmap=charsmap_blob(chain(1), b"     Z\0")), b"a" * 100)
    write("sentencepiece", "bad_model_type_cut_to_int32",
          hand_model(model_type=(1 << 64) - 2))
    write("sentencepiece", "valid_hand_built", hand_model())


def tokenizer_json_seeds():
    src = os.path.join(HERE, "corpus", "tokenizer")
    for name in ("seed_json_digits", "seed_json_llama3_style", "seed_json_sentencepiece_style"):
        with open(os.path.join(src, name), "rb") as f:
            b = f.read()[1:]  # the tokenizer target's kind byte
        n = struct.unpack("<I", b[:4])[0]
        write("tokenizer_json", name[len("seed_json_"):], b[4:4 + n], b[4 + n:])
    vocab = {"<unk>": 0, "a": 1, "b": 2, "\u2581": 3, "ab": 4, "\u2581a": 5, "1": 6, "2": 7}
    model = {"type": "BPE", "unk_token": "<unk>", "vocab": vocab, "merges": ["a b", "\u2581 a"]}

    def tok(normalizer=None, pre_tokenizer=None, added=()):
        return json.dumps({"added_tokens": list(added), "normalizer": normalizer,
                           "pre_tokenizer": pre_tokenizer, "model": model}).encode()

    def split(pattern, behavior, invert=False, regex=True):
        return {"type": "Split", "pattern": {"Regex" if regex else "String": pattern},
                "behavior": behavior, "invert": invert}

    for behavior in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
        write("tokenizer_json", f"split_{behavior}", tok(pre_tokenizer=split(r"\s+|\p{N}", behavior)),
              b"ab 12  ab1 b")
    write("tokenizer_json", "split_string_inverted",
          tok(pre_tokenizer=split("b", "Isolated", invert=True, regex=False)), b"abab bba")
    write("tokenizer_json", "normalizers_all",
          tok({"type": "Sequence", "normalizers": [
              {"type": "NFC"}, {"type": "Prepend", "prepend": "\u2581"},
              {"type": "Replace", "pattern": {"Regex": " +"}, "content": "\u2581"}]},
              {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
               "split": False}), b"a  b ab")
    write("tokenizer_json", "byte_level_digits",
          tok(pre_tokenizer={"type": "Sequence", "pretokenizers": [
              {"type": "Digits", "individual_digits": False},
              {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}]}),
          "ab 12 \u00e9".encode())
    write("tokenizer_json", "added_tokens",
          tok(added=[{"id": 3, "content": "\u2581", "special": False, "lstrip": True},
                     {"id": 0, "content": "<unk>", "special": True}]), b"a \xe2\x96\x81 b<unk>")
    # Hostile: each Replace doubles "a" (40 of them would make 2^40 bytes).
    doubling = [{"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}] * 40
    write("tokenizer_json", "replace_doubling",
          tok({"type": "Sequence", "normalizers": doubling}), b"a")
    # Hostile: exponential backtracking at every position.
    write("tokenizer_json", "split_backtracking",
          tok(pre_tokenizer=split("(?:a|a){0,21}b|.", "Isolated")), b"a" * 3000)
    write("tokenizer_json", "metaspace_long_replacement",
          tok(pre_tokenizer={"type": "Metaspace", "replacement": "\u2581" * 2000, "split": True}),
          b"a " * 2000)


if __name__ == "__main__":
    for target in ("sentencepiece", "tokenizer_json"):
        shutil.rmtree(os.path.join(HERE, "corpus", target), ignore_errors=True)
    sentencepiece_seeds()
    tokenizer_json_seeds()
