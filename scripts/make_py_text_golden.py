#!/usr/bin/env python3
"""Golden results of Python's str methods that lm-evaluation-harness's prompts use (tests/eval/tasks_test.cc).

HellaSwag's preprocessing capitalizes ctx_b with str.capitalize(): the first character title-cased and the rest
lower-cased, with Unicode's full case mappings (one character may become two) and the final-sigma rule. The strings
below exercise those rules; the output records the Python and Unicode versions that produced it.

Usage (from the repository root, any Python >= 3.8):
    python3 scripts/make_py_text_golden.py [--out tests/data/eval/py_text_golden.json]
"""
import argparse
import json
import sys
import unicodedata

CAPITALIZE = [
    "", "hELLO wORLD", "élan ÉTÉ", "'hello", "1ABC", "  spaced", "ǆemal", "ǈUBAV", "ßtraße", "STRASSE",
    "ΣΑΣ ΟΔΟΣ", "ΟΔΟΣ.", "Σ", "AΣB", "İSTANBUL", "ıi", "ŉ", "ﬁne ﬂow", "ᾳ ᾼ", "ǰ", "ΐ", "ﬀ",
    "ǲ", "Ǳ", "ǳ", "ÀÉÎÕÜ", "ĳssel", "Ĳssel", "日本語 ABC", "Ωmega", "ǄǅǆǇǈǉ", "ᏸᏹ", "Ꭰꭰ", "𐐨𐐀",
    "ᲐᲑᲒ", "ა ბ", "\u0345\u0399", "a\u0307", "\u1e9e", "ẞ", "ᾈᾀ", "ﬓ", "ŉABC",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/data/eval/py_text_golden.json")
    args = parser.parse_args()
    doc = {
        "provenance": f"scripts/make_py_text_golden.py (Python {sys.version.split()[0]}, Unicode "
                      f"{unicodedata.unidata_version})",
        "capitalize": [[s, s.capitalize()] for s in CAPITALIZE],
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
