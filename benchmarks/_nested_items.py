"""Items of usaddress's and probablepeople's shapes, made from any words.

usaddress and probablepeople (datamade's parsers, python-crfsuite models)
tag a sequence of dict items in which each item holds the features of its
token (bools, short strings or ``False``, ints and floats) and, nested under
``'previous'`` and ``'next'``, a copy of its neighbours' features; the first
and last items get a flag, also set in the neighbour's nested copy. These
functions build items of those shapes (the same keys and value types,
written for this benchmark; metaphone codes are imitated) from the Treebank's
words, so a model trained on them by python-crfsuite has the parsers' kinds
of attributes. Standard library only.
"""

VOWELS = set("aeiou")
VOWELS_Y = "aeiouy"
DIRECTIONS = {"n", "s", "e", "w", "ne", "nw", "se", "sw", "north", "south", "east", "west"}
STREET_TYPES = {"st", "street", "ave", "avenue", "rd", "road", "blvd", "ln", "dr", "way"}
NAME_WORDS = {"john", "mary", "james", "smith", "brown", "mr", "mrs", "dr", "jr"}


def _strip(token, keep="."):
    """``token`` without its leading and trailing punctuation (``keep`` kept at the end)."""
    start, end = 0, len(token)
    while start < end and not token[start].isalnum():
        start += 1
    while end > start and not (token[end - 1].isalnum() or token[end - 1] in keep):
        end -= 1
    return token[start:end]


def _digits(text):
    if text.isdigit():
        return "all_digits"
    return "some_digits" if any(ch.isdigit() for ch in text) else "no_digits"


def address_features(token):
    """One token's features, as usaddress's: 9 keys, bools and str-or-False values."""
    clean = _strip(token) or token
    abbrev = clean.replace(".", "").lower()
    digit = abbrev.isdigit()
    return {
        "abbrev": clean[-1] == ".",
        "digits": _digits(clean),
        "word": abbrev if not digit else False,
        "trailing.zeros": abbrev[len(abbrev.rstrip("0")) :] if digit else False,
        "length": ("d:" if digit else "w:") + str(len(abbrev)),
        "endsinpunc": token[-1] if len(token) > 1 and not token[-1].isalnum() else False,
        "directional": abbrev in DIRECTIONS,
        "street_name": abbrev in STREET_TYPES,
        "has.vowels": bool(set(abbrev[1:]) & VOWELS),
    }


def name_features(token):
    """One token's features, as probablepeople's: about 35 keys (bools, ints,
    floats, str), prefixes, suffixes, 3- and 4-grams as keys."""
    clean = _strip(token.lower()) or token.lower()
    abbrev = "".join(ch for ch in clean if ch.isalnum()) or clean
    vowels = sum(abbrev.count(ch) for ch in VOWELS_Y)
    known = abbrev in NAME_WORDS
    features = {
        "nopunc": abbrev,
        "abbrev": clean.endswith("."),
        "comma": token.endswith(","),
        "hyphenated": "-" in clean,
        "contracted": "'" in clean,
        "bracketed": token[:1] in "\"('" and token[-1:] not in "\")'",
        "fullbracketed": token[:1] in "\"('" and token[-1:] in "\")'",
        "length": len(abbrev),
        "initial": len(abbrev) == 1 and abbrev.isalpha(),
        "has.vowels": bool(set(abbrev[1:]) & set(VOWELS_Y)),
        "just.letters": abbrev.isalpha(),
        "roman": set("xvi").issuperset(abbrev),
        "endswith.vowel": abbrev.endswith(tuple(VOWELS_Y)),
        "digits": _digits(abbrev),
        "metaphone1": abbrev[:4].upper().translate(str.maketrans("", "", "AEIOU")),
        "metaphone2": abbrev[1:4].upper() if len(abbrev) > 4 else "",
        "more.vowels": int(vowels // float(max(len(abbrev), 1))),
        "in.names": known,
        "prepositions": abbrev in {"of", "the", "and", "for", "by"},
        "first.name": (len(abbrev) % 7) / 7.0 if known else 0,
        "gender_ratio": (len(abbrev) % 5) / 5.0 if known else False,
        "possessive": clean.endswith("'s"),
    }
    reverse = abbrev[::-1]
    for k in range(1, min(len(abbrev), 6)):
        features[f"prefix_{k}"] = abbrev[:k]
        features[f"suffix_{k}"] = reverse[:k][::-1]
    for n in (3, 4):
        for k in range(len(abbrev) - n + 1):
            features[abbrev[k : k + n]] = True
    return features


def _linked(words, features, start, end, comma=False):
    """Items of one sequence: each token's features, its neighbours' nested
    under 'previous' and 'next' (shared copies), flags ``start``/``end``."""
    items = [features(words[0])]
    previous = items[-1].copy()
    seen_comma = False
    for word in words[1:]:
        item = features(word)
        if comma:
            seen_comma = seen_comma or previous["comma"]
            if seen_comma:
                item["seen.comma"] = True
        current = item.copy()
        items[-1]["next"] = current
        item["previous"] = previous
        items.append(item)
        previous = current
    items[0][start] = True
    items[-1][end] = True
    if len(items) > 1:
        items[1]["previous"][start] = True
        items[-2]["next"][end] = True
    return items


def address_items(words):
    """usaddress's shape (its ``tokens2features``)."""
    return _linked(words, address_features, "address.start", "address.end")


def name_items(words):
    """probablepeople's shape (its ``tokens2features``)."""
    return _linked(words, name_features, "rawstring.start", "rawstring.end", comma=True)


ITEMS = {"usaddress": address_items, "probablepeople": name_items}


def nested_features(kind, tagged_sentences):
    """Items (kind 'usaddress' or 'probablepeople') of every sentence, and its tags."""
    items = ITEMS[kind]
    X, y = [], []
    for sentence in tagged_sentences:
        words = [word for word, _ in sentence]
        X.append(items(words) if words else [])
        y.append([tag for _, tag in sentence])
    return X, y
