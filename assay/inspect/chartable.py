"""The characters normalization changes (docs/inspect.md, "Normalization"): the Unicode data
:mod:`assay.inspect.normalize` reads a text with.

- :data:`IGNORABLE`: the default-ignorable code points (Unicode's Default_Ignorable_Code_Point),
  removed;
- :data:`LOOK_ALIKES`: the Latin, Greek and Cyrillic letters that look like an ASCII letter
  (Unicode's confusables, restricted to those scripts), replaced by that letter;
- :func:`replacement` and :func:`table`: what every other character becomes (the ASCII text NFKC
  and the look-alikes make of it), the table built from :mod:`unicodedata` on first use over
  :data:`BLOCKS`, the blocks where such characters are (tests/inspect/test_normalize.py checks
  that no other block holds one).

Sans-IO and stateless; the standard library only.
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["BLOCKS", "IGNORABLE", "IGNORABLE_SET", "LOOK_ALIKES", "ZWSP", "replacement", "table"]

# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties), as ranges
IGNORABLE: Final[tuple[tuple[int, int], ...]] = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
IGNORABLE_SET: Final = frozenset(chr(cp) for lo, hi in IGNORABLE for cp in range(lo, hi + 1))
ZWSP: Final = "\u200b"  # a zero-width *space*: between two words it is a space too

# Latin, Greek and Cyrillic letters that look like an ASCII letter, and that NFKC does not make
# into one (Unicode's confusables, their single-letter prototypes in these scripts), each after the
# letter it passes for. Capital I-like letters pass for "I" (the prototype is "l", which no word
# of a phrase would read).
_LOOK_ALIKES: Final = (
    "a\u0251\u03b1\u0430"
    "A\u1d00\u0391\u0410"
    "b\u0184\u042c"
    "B\u0392\u0412\ua7b4"
    "c\u1d04\u03f2\u0441"
    "C\u03f9\u0421"
    "d\u0501"
    "e\uab32\u0435\u04bd"
    "E\u0395\u0415"
    "f\uab35\ua799\u1e9d"
    "F\ua798\u03dc"
    "g\u0261\u1d83\u018d"
    "G\u050c"
    "h\u04bb"
    "H\u0397\u041d"
    "i\u0131\u026a\u0269\u03b9\u0456\ua647\u04cf"
    "I\u0196\u0399\u0406\u04c0"
    "j\u03f3\u0458"
    "J\u037f\u0408\ua7b2"
    "k\u1d0b\u0138\u03ba\u043a"
    "K\u039a\u041a"
    "M\u039c\u03fa\u041c"
    "n\u043f"
    "N\u039d"
    "o\u1d0f\u1d11\uab3d\u03bf\u03c3\u043e"
    "O\u039f\u041e"
    "p\u03c1\u0440"
    "P\u03a1\u0420"
    "q\u051b"
    "r\uab47\uab48\u1d26\u0433"
    "R\u01a6"
    "s\ua731\u01bd\u0455"
    "S\u0405"
    "t\u1d1b\u03c4\u0442"
    "T\u03a4\u0422"
    "u\ua79f\u1d1c\uab4e\uab52\u028b\u03c5\u0446"
    "v\u1d20\u03bd\u0475"
    "V\u0474"
    "w\u0461\u051d\u1d21"
    "W\u051c"
    "x\u0445"
    "X\u03a7\u0425"
    "y\u0263\u1d8c\u028f\u1eff\uab5a\u03b3\u0443\u04af"
    "Y\u03a5\u03d2\u04ae"
    "z\u1d22"
    "Z\u0396"
)


def _look_alikes() -> dict[str, str]:
    out: dict[str, str] = {}
    target = ""
    for char in _LOOK_ALIKES:
        if char.isascii():
            target = char
        else:
            out[char] = target
    return out


LOOK_ALIKES: Final = _look_alikes()
"""Each look-alike letter -> the ASCII letter it passes for."""

# the 256-character blocks that hold every character NFKC turns into text with an ASCII letter or
# digit, and every look-alike (tests/inspect/test_normalize.py checks both against unicodedata)
BLOCKS: Final = (
    0x00,
    0x01,
    0x02,
    0x03,
    0x04,
    0x05,
    0x1D,
    0x1E,
    0x1F,
    0x20,
    0x21,
    0x24,
    0x2A,
    0x2C,
    0x30,
    0x32,
    0x33,
    0xA6,
    0xA7,
    0xAB,
    0xFB,
    0xFC,
    0xFD,
    0xFE,
    0xFF,
    0x107,
    0x1D4,
    0x1D5,
    0x1D6,
    0x1D7,
    0x1F1,
    0x1FB,
)


def replacement(char: str) -> str:
    """What ``char`` is in the text the phrase rules read: nothing for a default-ignorable code
    point, the ASCII text NFKC and the look-alikes make of it, or the character itself."""
    if char in IGNORABLE_SET:
        return ""
    if char in LOOK_ALIKES:
        return LOOK_ALIKES[char]
    if unicodedata.is_normalized("NFKC", char):
        return char
    out = "".join(LOOK_ALIKES.get(c, c) for c in unicodedata.normalize("NFKC", char) if c not in IGNORABLE_SET)
    if out == char or not any(c.isascii() and c.isalnum() for c in out):
        return char  # no ASCII letter or digit comes of it (a space, a dot, "µ" -> "μ"): as it is
    return out


_TABLE: dict[str, str] = {}


def table() -> dict[str, str]:
    """Every character (not default-ignorable) that normalization replaces -> its replacement."""
    if not _TABLE:
        for block in BLOCKS:
            for cp in range(block << 8, (block + 1) << 8):
                char = chr(cp)
                if cp < 0x80 or 0xD800 <= cp <= 0xDFFF or char in IGNORABLE_SET:
                    continue
                new = replacement(char)
                if new != char:
                    _TABLE[char] = new
    return _TABLE
