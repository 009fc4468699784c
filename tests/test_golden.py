"""Hand-worked golden tests: base symbols and BPE training on the three substrates.

In the style of minbpe's ``aaabdaaabac`` test: every expected value below is
worked out by hand in the comments (the UTF-8 / UTF-16LE bytes of each
character, the pair counts, each merge with the tie rule) and written as a
literal.  Nothing here is computed by the code under test or by
``ube_stream._reference``.

The rules (README / DESIGN conventions):

* text is split into chunks by the GPT-2 pattern; merges never cross chunks;
* pairs are counted at every adjacent position, overlaps included
  (``aaa`` holds ``(a, a)`` twice), weighted by how often the chunk occurs;
* the next merge is the pair with the highest count, ties broken by the
  smallest ``(left_id, right_id)``; new tokens take ids ``base, base + 1, ...``;
* a merge rewrites every chunk left to right without overlap
  (``a a a`` -> ``aa a``);
* training stops when no pair occurs at least ``min_frequency`` (2) times.

Characters used (hand-derived; ids in decimal):

    char  U+      UTF-8 bytes          UTF-16LE bytes       ube ids
    G     0047    71                   71 0                 71
    P     0050    80                   80 0                 80
    U     0055    85                   85 0                 85
    a     0061    97                   97 0                 97
    " "   0020    32                   32 0                 32
    é     00E9    C3 A9 = 195 169      E9 00 = 233 0        195 169 (2 UTF-8 bytes: UTF-8)
    性    6027    E6 80 A7 = 230 128 167   27 60 = 39 96    256+0x27, 256+0x60 = 295 352
    能    80FD    E8 83 BD = 232 131 189   FD 80 = 253 128  256+0xFD, 256+0x80 = 509 384
    न     0928    E0 A4 A8 = 224 164 168   28 09 = 40 9     256+0x28, 256+0x09 = 296 265
    😀    1F600   F0 9F 98 80 = 240 159 152 128
                  3D D8 00 DE = 61 216 0 222 (UTF-16LE)     317 472 256 478

性: 0x6027 = 0110 000000 100111 -> 1110_0110 10_000000 10_100111 = E6 80 A7.
能: 0x80FD = 1000 000011 111101 -> 1110_1000 10_000011 10_111101 = E8 83 BD.
न:  0x0928 = 0000 100100 101000 -> 1110_0000 10_100100 10_101000 = E0 A4 A8.
😀: 0x1F600 - 0x10000 = 0xF600 = 0b111101_1000000000: high surrogate
    0xD800 + 0x3D = 0xD83D, low 0xDC00 + 0x200 = 0xDE00 -> LE bytes 3D D8 00 DE;
    UTF-8 of 0x1F600 = 000 011111 011000 000000 -> F0 9F 98 80.
"""
import json
import os
import subprocess
import sys

import pytest

import ube_stream
from ube_stream import Tokenizer, decode_symbols, encode_symbols, floor_cost, pretokenize, train

# ============================================================== base symbols

@pytest.mark.parametrize("text, substrate, expected", [
    # GPU性能: 3 ASCII letters + two 3-byte CJK characters
    ("GPU性能", "ube", [71, 80, 85, 295, 352, 509, 384]),                      # 3 + 2 + 2 = 7
    ("GPU性能", "utf8", [71, 80, 85, 230, 128, 167, 232, 131, 189]),          # 3 + 3 + 3 = 9
    ("GPU性能", "utf16", [71, 0, 80, 0, 85, 0, 39, 96, 253, 128]),            # 2 * 5 = 10
    # a surrogate pair (4 UTF-8 bytes): its 4 UTF-16LE bytes, in the 256.. alphabet under ube
    ("😀", "ube", [317, 472, 256, 478]),
    ("😀", "utf8", [240, 159, 152, 128]),
    ("😀", "utf16", [61, 216, 0, 222]),
    # a 2-byte UTF-8 character stays UTF-8 under ube
    ("é", "ube", [0xC3, 0xA9]),
    ("é", "utf8", [195, 169]),
    ("é", "utf16", [233, 0]),
    # Devanagari NA (3 UTF-8 bytes): UTF-16LE under ube
    ("न", "ube", [296, 265]),
    ("न", "utf8", [224, 164, 168]),
    ("न", "utf16", [40, 9]),
    # both alphabets in one string: é (UTF-8 bytes), 性 (UTF-16 bytes), a (UTF-8)
    ("é性a", "ube", [195, 169, 295, 352, 97]),
])
def test_golden_base_symbols(text, substrate, expected):
    ids = encode_symbols(text, substrate)
    assert ids.tolist() == expected
    assert floor_cost(text, substrate) == len(expected)
    assert decode_symbols(expected, substrate) == text


def test_golden_ube_is_shorter_than_both_baselines_on_cjk():
    assert [floor_cost("GPU性能", s) for s in ("ube", "utf8", "utf16")] == [7, 9, 10]


def test_golden_cli_explain():
    """``ube explain "GPU性能"``, the README's example, line for line.  UTF-8 bytes are shown as
    GPT-2 byte characters (printable bytes as themselves: G P U ' ` § ½ æ è ý; bytes
    0..32 as U+0100.., 127..160 as U+0121..: 0x00 Ā, 0x80 Ģ, 0x83 ĥ); UTF-16 bytes under
    ube as U+E100 + byte."""
    root = os.path.dirname(os.path.dirname(ube_stream.__file__))  # run the package under test
    out = subprocess.run([sys.executable, "-m", "ube_stream", "explain", "GPU性能"], cwd=root,
                         capture_output=True, text=True, encoding="utf-8", check=True).stdout
    assert out == (
        "text: 'GPU性能'  (5 characters, 9 UTF-8 bytes)\n"
        "chunks (gpt2): 1\n"
        "  chunk                    ube    utf8   utf16\n"
        "  'GPU性能'                    7       9      10\n"
        "  floor cost                 7       9      10\n"
        "symbols:\n"
        "  ube       7  G P U U+E127 U+E160 U+E1FD U+E180\n"
        "  utf8      9  G P U æ Ģ § è ĥ ½\n"
        "  utf16    10  G Ā P Ā U Ā ' ` ý Ģ\n"
    )


# ============================================================== training
#
# Corpus: two documents,
#     doc 1  "性能 性能 GPU性能"
#     doc 2  "aaa aaa é性 é性"
# GPT-2 chunks (letters with an optional leading space; 性 能 é are letters):
#     A  "性能"        x1        D   "aaa"   x1
#     B  " 性能"       x1        D'  " aaa"  x1
#     C  " GPU性能"    x1        E   " é性"  x2
# Each golden merge list below fails for a trainer that counted pairs across
# chunks (doc 1 holds 能+space twice), counted "aaa" as one (a, a) instead of
# two, broke ties by the largest pair, or rewrote right to left (a aa, not aa a).

CORPUS = ["性能 性能 GPU性能", "aaa aaa é性 é性"]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("golden") / "corpus.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for text in CORPUS:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def trained(corpus_file):
    """One tokenizer per substrate, trained to exhaustion (min_frequency 2)."""
    return {s: train([corpus_file], vocab_size=2000, substrate=s, workers=1, show_progress=False)
            for s in ("ube", "utf8", "utf16")}


def test_golden_chunks():
    assert pretokenize(CORPUS[0]) == ["性能", " 性能", " GPU性能"]
    assert pretokenize(CORPUS[1]) == ["aaa", " aaa", " é性", " é性"]


# ------------------------------------------------------------------ ube
#
# Base symbols (base 512, new ids from 512):
#     A   [295, 352, 509, 384]                     x1
#     B   [32, 295, 352, 509, 384]                 x1
#     C   [32, 71, 80, 85, 295, 352, 509, 384]     x1
#     D   [97, 97, 97]                             x1
#     D'  [32, 97, 97, 97]                         x1
#     E   [32, 195, 169, 295, 352]                 x2
# Pair counts:
#     (295,352) 5 = A+B+C+2E    (97,97) 4 = 2 in D + 2 in D' (overlapping)
#     (352,509) 3    (509,384) 3    (32,195) 2    (195,169) 2    (169,295) 2
#     (32,97) (32,295) (32,71) (71,80) (80,85) (85,295): 1 each
# 1. (295,352) 5               -> 512  性
#       A [512,509,384]  B [32,512,509,384]  C [32,71,80,85,512,509,384]  E [32,195,169,512]
#    counts: (97,97) 4, (512,509) 3, (509,384) 3, (32,195) 2, (195,169) 2, (169,512) 2
# 2. (97,97) 4                 -> 513  aa
#       D [513,97]  D' [32,513,97]   (left to right: aa + a)
#    counts: (513,97) 2, (32,513) 1
# 3. tie at 3: (509,384) < (512,509) -> 514  能
#       A [512,514]  B [32,512,514]  C [32,71,80,85,512,514]
# 4. (512,514) 3               -> 515  性能
#       A [515]  B [32,515]  C [32,71,80,85,515]
#    counts at 2: (32,195) (169,512) (195,169) (513,97)
# 5. (32,195) smallest         -> 516  " " + é's first UTF-8 byte
#       E [516,169,512]   ((195,169) is gone: its 195 was taken)
#    counts at 2: (169,512) (513,97) (516,169)
# 6. (169,512) smallest        -> 517  é's second UTF-8 byte + 性: the two alphabets joined
#       E [516,517]
#    counts at 2: (513,97) (516,517)
# 7. (513,97)                  -> 518  aaa
#       D [518]  D' [32,518]
# 8. (516,517)                 -> 519  " é性"
#       E [519]
# Left: (32,515) (32,518) and the GPU pairs, 1 each: below min_frequency 2, stop.
# 8 merges; vocab = 512 + 8 + 1 special = 521, the special at 520.

UBE_MERGES = [(295, 352), (97, 97), (509, 384), (512, 514), (32, 195), (169, 512), (513, 97), (516, 517)]


def test_golden_train_ube(trained):
    tok = trained["ube"]
    assert tok.merges == UBE_MERGES
    assert tok.merge_results == [512, 513, 514, 515, 516, 517, 518, 519]
    assert tok.vocab_size == 521
    assert tok.special_tokens == {"<|endoftext|>": 520}


@pytest.mark.parametrize("text, expected", [
    ("性能", [515]),
    (" 性能", [32, 515]),                        # no (32,515) merge: seen once
    (" GPU性能", [32, 71, 80, 85, 515]),
    ("GPU性能", [71, 80, 85, 515]),
    ("aaa", [518]),                              # -m2-> [513,97] -m7-> [518]
    ("aaaa", [513, 513]),                        # -m2-> [513,513]: no (513,513) merge
    ("aaaaa", [513, 518]),                       # -m2-> [513,513,97] -m7-> [513,518]
    (" aaa", [32, 518]),
    # [32,195,169,295,352] -m1-> [32,195,169,512] -m5-> [516,169,512] -m6-> [516,517] -m8-> [519]
    (" é性", [519]),
    # an unseen chunk: [195,169,295,352] -m1-> [195,169,512] -m6-> [195,517]
    ("é性", [195, 517]),
    # whole documents: chunk by chunk, never merged across
    ("性能 性能 GPU性能", [515, 32, 515, 32, 71, 80, 85, 515]),
    ("aaa aaa é性 é性", [518, 32, 518, 519, 519]),
    # unseen characters stay base symbols: 😀 (4 UTF-16 bytes), न (2)
    ("😀न", [317, 472, 256, 478, 296, 265]),
])
def test_golden_encode_ube(trained, text, expected):
    tok = trained["ube"]
    assert tok.encode(text).tolist() == expected
    assert tok.decode(expected) == text


def test_golden_vocab_cap_keeps_the_first_merges(corpus_file):
    # vocab 512 + 3 + 1: merges 1..3 of the golden order, then the special
    tok = train([corpus_file], vocab_size=516, substrate="ube", workers=1, show_progress=False)
    assert tok.merges == [(295, 352), (97, 97), (509, 384)]
    assert tok.special_tokens == {"<|endoftext|>": 515}
    assert tok.encode(" é性").tolist() == [32, 195, 169, 512]
    assert tok.encode("性能").tolist() == [512, 514]


def test_golden_saved_file_round_trips(trained, tmp_path):
    trained["ube"].save(tmp_path / "ube.json")
    again = Tokenizer.load(tmp_path / "ube.json")
    assert again.merges == UBE_MERGES
    assert again.encode("aaa aaa é性 é性").tolist() == [518, 32, 518, 519, 519]


# ------------------------------------------------------------------ utf8
#
# Base symbols (base 256): 性 = 230 128 167, 能 = 232 131 189, é = 195 169
#     A   [230,128,167,232,131,189]                x1
#     B   [32, +A]                                 x1
#     C   [32,71,80,85, +A]                        x1
#     D   [97,97,97]   D' [32,97,97,97]            x1 each
#     E   [32,195,169,230,128,167]                 x2
# Pair counts: (230,128) 5  (128,167) 5  (97,97) 4  (167,232) 3  (232,131) 3  (131,189) 3
#              (32,195) 2  (195,169) 2  (169,230) 2  rest 1
# 1.  tie at 5: (128,167) < (230,128) -> 256
#        A [230,256,232,131,189]  E [32,195,169,230,256]
#     counts: (230,256) 5, (97,97) 4, (256,232) 3, (232,131) 3, (131,189) 3, ...
# 2.  (230,256) 5                      -> 257  性
#        A [257,232,131,189]  E [32,195,169,257]
# 3.  (97,97) 4                        -> 258  aa      D [258,97]  D' [32,258,97]
#     counts at 3: (257,232) (232,131) (131,189); at 2: (32,195) (195,169) (169,257) (258,97)
# 4.  tie at 3: (131,189) smallest     -> 259          A [257,232,259]
# 5.  tie at 3: (232,259) < (257,232)  -> 260  能      A [257,260]
# 6.  (257,260) 3                      -> 261  性能    A [261]  B [32,261]  C [32,71,80,85,261]
# 7.  (32,195)                         -> 262          E [262,169,257]
# 8.  (169,257) < (258,97) < (262,169) -> 263          E [262,263]
# 9.  (258,97) < (262,263)             -> 264  aaa     D [264]  D' [32,264]
# 10. (262,263)                        -> 265  " é性"  E [265]
# Stop: 10 merges, vocab 256 + 10 + 1 = 267.
# UTF-8 needs 6 merges to make 性能 one token (three per character); ube needed 3.

UTF8_MERGES = [(128, 167), (230, 256), (97, 97), (131, 189), (232, 259),
               (257, 260), (32, 195), (169, 257), (258, 97), (262, 263)]


def test_golden_train_utf8(trained):
    tok = trained["utf8"]
    assert tok.merges == UTF8_MERGES
    assert tok.merge_results == list(range(256, 266))
    assert tok.vocab_size == 267
    assert tok.special_tokens == {"<|endoftext|>": 266}


@pytest.mark.parametrize("text, expected", [
    ("性能", [261]),
    ("GPU性能", [71, 80, 85, 261]),
    ("aaa", [264]),
    ("aaaaa", [258, 264]),                       # -m3-> [258,258,97] -m9-> [258,264]
    (" é性", [265]),
    # [195,169,230,128,167] -m1-> [195,169,230,256] -m2-> [195,169,257] -m8-> [195,263]
    ("é性", [195, 263]),
    ("性能 性能 GPU性能", [261, 32, 261, 32, 71, 80, 85, 261]),
    ("aaa aaa é性 é性", [264, 32, 264, 265, 265]),
])
def test_golden_encode_utf8(trained, text, expected):
    tok = trained["utf8"]
    assert tok.encode(text).tolist() == expected
    assert tok.decode(expected) == text


# ------------------------------------------------------------------ utf16
#
# Base symbols (base 256): ASCII x -> [x, 0]; é -> [233,0]; 性 -> [39,96]; 能 -> [253,128]
#     A   [39,96,253,128]                          x1
#     B   [32,0,39,96,253,128]                     x1
#     C   [32,0,71,0,80,0,85,0,39,96,253,128]      x1
#     D   [97,0,97,0,97,0]                         x1
#     D'  [32,0,97,0,97,0,97,0]                    x1
#     E   [32,0,233,0,39,96]                       x2
# Pair counts:
#     (97,0) 6 = 3 in D + 3 in D'     (0,97) 5 = 2 in D + 3 in D'
#     (39,96) 5 = A+B+C+2E            (32,0) 5 = B+C+D'+2E
#     (0,39) 4 = B + C (U's 0) + 2E (é's 0)    (96,253) 3    (253,128) 3
#     (0,233) 2    (233,0) 2    (0,71) (71,0) (0,80) (80,0) (0,85) (85,0): 1 each
# 1.  (97,0) 6                        -> 256  a
#        D [256,256,256]  D' [32,0,256,256,256]
#     counts: (32,0) 5, (39,96) 5, (256,256) 4 (overlapping), (0,39) 4, (96,253) 3, (253,128) 3
# 2.  tie at 5: (32,0) < (39,96)      -> 257  space
#        B [257,39,96,253,128]  C [257,71,0,80,0,85,0,39,96,253,128]  D' [257,256,256,256]
#        E [257,233,0,39,96]
#     counts: (39,96) 5, (256,256) 4, (0,39) 3 = C+2E, (96,253) 3, (253,128) 3,
#             (257,233) 2, (233,0) 2; (0,233) is gone
# 3.  (39,96) 5                       -> 258  性
#        A [258,253,128]  B [257,258,253,128]  C [257,71,0,80,0,85,0,258,253,128]  E [257,233,0,258]
#     counts: (256,256) 4, (0,258) 3 = C+2E, (258,253) 3, (253,128) 3, (257,233) 2, (233,0) 2
# 4.  (256,256) 4                     -> 259  aa      D [259,256]  D' [257,259,256]
# 5.  tie at 3: (0,258) < (253,128) < (258,253) -> 260  (previous character's 0 byte) + 性
#        C [257,71,0,80,0,85,260,253,128]  E [257,233,260]
#     counts: (253,128) 3, (258,253) 2 = A+B, (233,260) 2, (257,233) 2, (259,256) 2
# 6.  (253,128) 3                     -> 261  能
#        A [258,261]  B [257,258,261]  C [257,71,0,80,0,85,260,261]
#     counts at 2: (233,260) (257,233) (258,261) (259,256)
# 7.  (233,260) smallest              -> 262  é性     E [257,262]
# 8.  (257,262) < (258,261) < (259,256) -> 263  " é性"   E [263]
# 9.  (258,261) < (259,256)           -> 264  性能    A [264]  B [257,264]
# 10. (259,256)                       -> 265  aaa     D [265]  D' [257,265]
# Stop: 10 merges, vocab 266 + 1.  C keeps (260,261): 性能 after U is "0性" + "能".

UTF16_MERGES = [(97, 0), (32, 0), (39, 96), (256, 256), (0, 258),
                (253, 128), (233, 260), (257, 262), (258, 261), (259, 256)]


def test_golden_train_utf16(trained):
    tok = trained["utf16"]
    assert tok.merges == UTF16_MERGES
    assert tok.merge_results == list(range(256, 266))
    assert tok.vocab_size == 267
    assert tok.special_tokens == {"<|endoftext|>": 266}


@pytest.mark.parametrize("text, expected", [
    # [39,96,253,128] -m3-> [258,253,128] -m6-> [258,261] -m9-> [264]
    ("性能", [264]),
    # [32,0,39,96,253,128] -m2-> [257,39,96,253,128] -m3-> [257,258,253,128]
    #   -m6-> [257,258,261] -m9-> [257,264]
    (" 性能", [257, 264]),
    # [71,0,80,0,85,0,39,96,253,128] -m3-> [71,0,80,0,85,0,258,253,128]
    #   -m5-> [71,0,80,0,85,260,253,128] -m6-> [71,0,80,0,85,260,261]
    ("GPU性能", [71, 0, 80, 0, 85, 260, 261]),
    # [97,0,97,0,97,0] -m1-> [256,256,256] -m4-> [259,256] -m10-> [265]
    ("aaa", [265]),
    # [256 x5] -m4-> [259,259,256] -m10-> [259,265]
    ("aaaaa", [259, 265]),
    # [32,0,233,0,39,96] -m2-> [257,233,0,39,96] -m3-> [257,233,0,258] -m5-> [257,233,260]
    #   -m7-> [257,262] -m8-> [263]
    (" é性", [263]),
    # [233,0,39,96] -m3-> [233,0,258] -m5-> [233,260] -m7-> [262]
    ("é性", [262]),
    ("性能 性能 GPU性能", [264, 257, 264, 257, 71, 0, 80, 0, 85, 260, 261]),
    ("aaa aaa é性 é性", [265, 257, 265, 263, 263]),
])
def test_golden_encode_utf16(trained, text, expected):
    tok = trained["utf16"]
    assert tok.encode(text).tolist() == expected
    assert tok.decode(expected) == text


# ============================================================== one long chunk
#
# "ab" * 35 is one GPT-2 chunk of 70 letters: a long word, merged as a linked list
# of positions.  ube and utf8 give ASCII its byte values:
#   (a,b)=35 > (b,a)=34 -> X; X^35 -> (X,X)=34 -> X2: X2^17 X (left to right)
#   (X2,X2)=16 -> X3: X3^8 X2 X;  (X3,X3)=7 -> X4: X4^4 X2 X;  (X4,X4)=3 -> X5: X5 X5 X2 X
#   then every pair once: stop (min_frequency 2)
# utf16 spells each letter (code, 0): a 0 b 0 ... 140 symbols
#   (97,0) (0,98) (98,0) 35 each, (0,97) 34: tie -> smallest (0,98) -> 256: 97 256 0 ...
#   (97,256) (256,0) 35 -> (97,256) -> 257: 257 0 ...;  (257,0) 35 -> 258 = "ab"
#   then as above from 258^35: 259, 260, 261, 262
LONG_CHUNK_MERGES = {
    "ube": [(97, 98), (512, 512), (513, 513), (514, 514), (515, 515)],
    "utf8": [(97, 98), (256, 256), (257, 257), (258, 258), (259, 259)],
    "utf16": [(0, 98), (97, 256), (257, 0), (258, 258), (259, 259), (260, 260), (261, 261)],
}


@pytest.mark.parametrize("substrate", ["ube", "utf8", "utf16"])
def test_golden_train_one_long_chunk(substrate):
    tok = train(iter(["ab" * 35]), vocab_size=2000, substrate=substrate, workers=1, show_progress=False)
    assert tok.merges == LONG_CHUNK_MERGES[substrate]
    results = tok.merge_results
    ab = results[-5]                       # X: the token "ab"; X2 "abab"; X5, the last
    assert tok.decode([ab]) == "ab" and tok.decode([results[-4]]) == "abab"
    assert list(tok.encode_ordinary("ab" * 35)) == [results[-1], results[-1], results[-4], ab]
