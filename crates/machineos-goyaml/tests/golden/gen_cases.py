#!/usr/bin/env python3
"""Writes goyaml.cases.jsonl: the inputs of the golden test of machineos-goyaml.

Hand-picked strings for every rule of yaml.v2's encoder and emitter (type resolution,
indicators, whitespace, line breaks, escapes, folding, key order, refused characters),
numbers, shapes, and seeded pseudo-random documents. Deterministic: the same file each run.
"""
import json
import random

STRINGS = [
    # resolution: strings yaml.v2 would read back as another type are quoted
    "", "y", "Y", "yes", "Yes", "n", "no", "NO", "on", "On", "off", "OFF", "true", "True",
    "TRUE", "false", "null", "Null", "NULL", "~", ".inf", ".Inf", "-.inf", "+.INF", ".nan",
    ".NaN", ".iNf", "<<", "1", "-1", "+1", "0", "00", "0755", "08", "0x1F", "0X1f", "0o17",
    "0b101", "-0b101", "0b", "0x", "1_000", "_5", "5_", "1e3", "1E3", "1e", "1.5", ".5", "+.5",
    "1.", "-.5e3", "1e400", ".5e400", "-", "+", "--", "---", "...", "....", "--- a",
    "2024-01-02", "2024-1-2", "2024-13-01", "2024-02-30", "2024-02-29", "2023-02-29",
    "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "2001-12-14T21:59:43Z",
    "2001-12-14T21:59:43.123456789012Z", "2001-12-14T25:00:00Z", "2001-12-14 1:2:3",
    "2001-12-14x", "20011-12-14", "1:20", "190:20:30", "1:60", "-1:20.5", "12:30:00", "1:2:",
    "sha256:abc", "quay.io/openshift/release@sha256:0123456789abcdef", "a:b:c", "1.2.3",
    "3.5.0", "v1", "1a", "nosmt", "systemd.unified_cgroup_hierarchy=1", "=", "inf", "nan",
    "Infinity", "0x1p-2",
    # indicators
    "#a", "a #b", "a#b", "-a", "- a", ":a", "a:b", "a: b", "a:", ":", "?a", "? a", "?", "[x]",
    "a[x]", "{x}", "a{x}", "a,b", ",a", "&a", "a&b", "*a", "!a", "|a", ">a", "'a", "a'b",
    "\"a", "a\"b", "a\\b", "%a", "@a", "`a", "a`", "a|b",
    # whitespace and breaks
    " a", "a ", " ", "  ", "a  b", "\ta", "a\tb", "a\t", "\n", "\n\n", "a\n", "a\nb", "a\n\n",
    "\na", "a \nb", "a\n b", "a\r\nb", "a\rb", "\r", "a\u0085b", "a\u2028b", "a\u2029b",
    "line1\nline2\n", "  indented\nx\n", "trailing space \nx", "x\n\n\ny\n\n", "a\n\tb",
    "[Unit]\nDescription=Example\n\n[Service]\nExecStart=/usr/bin/true\n",
    "# comment\nkey: value\n", "- item\n", "a\u00a0\nb",
    # a raw NEL is a line break inside yaml.v2's quoted scalar: folded, or a document marker
    "a \u0085 b", "a\u0085\u0085b", "a\u0085\u0085\u0085b", "\u0085\u0085", "a\u0085---",
    "a\u0085--- b", "a\u0085... b", "a\u0085\u0085--- x", "a\u0085 --- x", " \u0085 x", "x \u0085",
    "a\u0085---\u0085", "a\u0085....", "a \u0085\u0085 b\n",
    # unicode
    "\u00e9", "\u65e5\u672c\u8a9e", "a\u00a0b", "\u00a0", "\U0001F600", "a\U0001F600b",
    "\ufeffabc", "a\ufeffb", "\ufeff", "\u0001", "a\u001fb", "\u001b[0m", "\u0000", "\ue000",
    "\ufffd", "\u0085", "\u2028", "\ud7ff", "caf\u00e9 cr\u00e8me",
    # refused by yaml.v2's reader (Go writes them raw in JSON)
    "\u007f", "a\u0080", "\u009f", "\ufffe", "\uffff",
]

WORDS = ["data:,", "lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "x", "/etc/foo",
         "--flag=value", "a:b", "#", "\u00e9t\u00e9", "\U0001F600", "'q'", "\"d\"", "\t"]


def long_strings(rng):
    out = []
    for n in (79, 80, 81, 82, 100, 160, 250):
        out.append(("w" * 10 + " ") * (n // 11))
        out.append("x" * n)
        out.append(" " + ("ab " * (n // 3)))          # leading space: single-quoted
        out.append(("ab  " * (n // 4)).strip())        # double spaces
        out.append("a: " + ("word " * (n // 5)))      # ': ' → single-quoted
        out.append("\t" + ("word " * (n // 5)))       # tab → double-quoted
        out.append(("word " * (n // 5)) + "\n" + ("more " * (n // 5)))  # literal, long lines
        out.append("\"" + ("q " * (n // 2)))         # starts with a quote
    for _ in range(60):
        out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40))))
    for _ in range(30):
        out.append("  ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30))))
    return out


KEYS = ["a", "B", "b", "a1", "a10", "a2", "a01", "a001", "a0", "_a", "1", "10", "2", "-",
        "\u00e9", "Z", "a_b", "ab", "x9y", "x10y", "x09y", "0", "00", "01", "y", "on", "",
        "a b", "a:b", "a\nb", "k" * 129, "k" * 128, "a\tb", "9a", "a9", "aa", "A", "\U0001F600"]


def random_value(rng, depth):
    r = rng.random()
    if depth > 3 or r < 0.45:
        c = rng.random()
        if c < 0.6:
            return rng.choice(STRINGS + [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 25)))])
        if c < 0.75:
            return rng.choice([0, 1, -1, 420, 493, 0o1777, 2**31, 2**53 + 1, -(2**63), 2**63 - 1,
                               2**64 - 1])
        if c < 0.85:
            return rng.choice([True, False, None])
        return rng.choice([0.5, -0.5, 1.5e300, 1e21, 1e-7, 1234567.5, 0.1, 3.0, -0.0])
    if r < 0.7:
        return {rng.choice(KEYS + ["k%d" % i for i in range(20)]): random_value(rng, depth + 1)
                for _ in range(rng.randint(0, 6))}
    return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def main():
    rng = random.Random(20261201)
    cases = []
    for s in STRINGS + long_strings(rng):
        cases.append({"value": {"k": s}})
        cases.append({"value": [s]})
        cases.append({"value": {"outer": {"inner": [{"k": s, "z": [s]}]}}})
    for k in KEYS + STRINGS:
        cases.append({"value": {k: 1, "m": {k: [k]}}})
    cases.append({"value": {k: i for i, k in enumerate(KEYS)}})
    for n in [0, 1, -1, 420, 2**53 + 1, -(2**63), 2**63 - 1, 2**64 - 1, 0.5, -0.5, 1e21, 1e20,
              1e-6, 1e-7, 1234567.5, 123456.5, 100000.0, 1000000.0, 0.0001, 0.00001, 1.5e300,
              -0.0, 3.0, 2.5e-10]:
        cases.append({"value": {"n": n, "l": [n]}})
    for nel in [{"a": "x\u0085y", "b\u0085c": 1}, {"a": "x\u0085\u0085y", "z": {"b\u0085c": 1}},
                [{"k": "\u0085"}, {"k\u0085": 2}], {"a": "\u0085--- ", "b": "\u007f"},
                {"a": "\u007f", "b": "\u0085--- "}, {"a\u0085": "\u007f"}]:
        cases.append({"value": nel})
    for shape in [{}, [], {"a": {}}, {"a": []}, [[]], [{}], [[1, [2, []]]], [{"a": [{"b": {}}]}],
                  {"a": [[1, 2], {"b": [3]}]}, [None, True, False], {"a": None}]:
        cases.append({"value": shape})
    for _ in range(400):
        cases.append({"value": random_value(rng, 0)})
    with open("goyaml.cases.jsonl", "w") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=True, sort_keys=True) + "\n")


main()
