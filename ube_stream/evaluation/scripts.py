"""The main script of a language's text, from the Unicode Script property.

A parallel file may carry a ``script`` field per item; when a language has
none, :func:`main_script` infers it: every letter or mark of the language's
items is looked up in the Unicode Script property (the ``regex`` module's
``\\p{Script=...}``, one alternation of the scripts the installed ``regex``
knows, each distinct character matched once), and the most frequent script
wins.  ``Common`` and ``Inherited`` characters (digits, punctuation,
combining marks shared by several scripts) do not vote.  Han text with kana
is labelled ``Jpan``, Han with Hangul ``Kore``, Han alone ``Hani``.

>>> main_script(["Привет, мир", "Добрый день"])
'Cyrl'
>>> main_script(["日本語のテキスト"]), main_script(["中文文本"]), main_script(["123 !?"]) is None
('Jpan', 'Hani', True)
"""
from __future__ import annotations

import collections
import functools
from typing import Dict, Iterable, Optional

__all__ = ["main_script", "HOW"]

# How scripts are inferred, recorded in evaluation outputs (``table["script_inference"]``).
HOW = ("Unicode Script property of the language's letters and marks (regex \\p{Script=...}); "
       "the most frequent script; Han with kana -> Jpan, with Hangul -> Kore")

# ISO 15924 codes of Unicode scripts (Unicode 15/16); the ones the installed
# `regex` does not know are left out when the pattern is built.
_CODES = (
    "Adlm Aghb Ahom Arab Armi Armn Avst Bali Bamu Bass Batk Beng Bhks Bopo Brah Brai Bugi Buhd Cakm Cans Cari "
    "Cham Cher Chrs Copt Cpmn Cprt Cyrl Deva Diak Dogr Dsrt Dupl Egyp Elba Elym Ethi Gara Geor Glag Gong Gonm "
    "Goth Gran Grek Gujr Gukh Guru Hang Hani Hano Hatr Hebr Hira Hluw Hmng Hmnp Hung Ital Java Kali Kana Kawi "
    "Khar Khmr Khoj Kits Knda Krai Kthi Lana Laoo Latn Lepc Limb Lina Linb Lisu Lyci Lydi Mahj Maka Mand Mani "
    "Marc Medf Mend Merc Mero Mlym Modi Mong Mroo Mtei Mult Mymr Nagm Nand Narb Nbat Newa Nkoo Nshu Ogam Olck "
    "Onao Orkh Orya Osge Osma Ougr Palm Pauc Perm Phag Phli Phlp Phnx Plrd Prti Rjng Rohg Runr Samr Sarb Saur "
    "Sgnw Shaw Shrd Sidd Sind Sinh Sogd Sogo Sora Soyo Sund Sunu Sylo Syrc Tagb Takr Tale Talu Taml Tang Tavt "
    "Tayo Telu Tfng Tglg Thaa Thai Tibt Tirh Tnsa Todr Tols Toto Tutg Ugar Vaii Vith Wara Wcho Xpeo Xsux Yezi "
    "Yiii Zanb"
).split()


@functools.lru_cache(maxsize=1)
def _script_pattern():
    import regex

    known = []
    for code in _CODES:
        try:
            regex.compile(rf"\p{{Script={code}}}")
        except regex.error:
            continue
        known.append(code)
    return regex.compile("|".join(rf"(?P<{code}>\p{{Script={code}}})" for code in known))


def script_of(char: str, _cache: Dict[str, Optional[str]] = {}) -> Optional[str]:  # noqa: B006 (a cache)
    """The ISO 15924 code of ``char``'s Unicode script, ``None`` for Common /
    Inherited / unassigned characters.

    >>> script_of("a"), script_of("ᱚ"), script_of("7")
    ('Latn', 'Olck', None)
    """
    if char not in _cache:
        m = _script_pattern().match(char)
        _cache[char] = m.lastgroup if m else None
    return _cache[char]


def main_script(texts: Iterable[str]) -> Optional[str]:
    """The most frequent script of the letters and marks of ``texts`` (ties: the
    code first in alphabetical order), ``None`` when no character has one."""
    per_char: collections.Counter = collections.Counter()
    for text in texts:
        per_char.update(text)
    votes: collections.Counter = collections.Counter()
    for char, n in per_char.items():
        code = script_of(char)
        if code is not None:
            votes[code] += n
    if not votes:
        return None
    best = min(votes, key=lambda code: (-votes[code], code))
    if best in ("Hani", "Hira", "Kana", "Hang"):
        if votes["Hira"] or votes["Kana"]:
            return "Jpan"
        if votes["Hang"]:
            return "Kore"
    return best
