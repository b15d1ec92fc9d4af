"""Tagged JSON values: labels and parameters of any type, read back exactly.

The codec of the model files' metadata (:mod:`skcrf._persist._npz`) and of
CRFsuite files' label chunk (:mod:`skcrf._persist._crfsuite_file`); strict
parsing hooks (no duplicate keys, no NaN constants).
"""

import math

import numpy as np

# numpy scalar types a label (or parameter) may have, by dtype name.
NUMPY_TYPES = {
    np.dtype(t).name: t
    for t in (
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
    )
}
NUMPY_TYPES["str_"] = np.str_
NUMPY_NAMES = {t: name for name, t in NUMPY_TYPES.items()}
_MAX_DEPTH = 32


# -- tagged encoding of values ---------------------------------------------


def encode_value(value, what, depth=0):
    """Tagged JSON encoding of ``value`` (see the module docstring)."""
    kind = type(value)
    if kind is str:
        return {"type": "str", "value": value}
    if kind is bool:
        return {"type": "bool", "value": value}
    if kind is int:
        return {"type": "int", "value": value}
    if kind is float:
        return {"type": "float", "value": repr(value)}
    if value is None:
        return {"type": "none"}
    if kind is bytes:
        return {"type": "bytes", "value": value.hex()}
    if kind is tuple or kind is list or kind is dict:
        if depth >= _MAX_DEPTH:
            raise TypeError(
                f"{what} {value!r:.200} is nested more than {_MAX_DEPTH} deep; it cannot be saved."
            )
        if kind is dict:
            encoded = {}
            for key, item in value.items():
                if type(key) is not str:
                    raise TypeError(
                        f"{what} {value!r:.200} has a key {key!r:.100} that is not a str; "
                        "skcrf model files store dicts with str keys only."
                    )
                encoded[key] = encode_value(item, what, depth + 1)
            return {"type": "dict", "value": encoded}
        return {
            "type": kind.__name__,
            "value": [encode_value(item, what, depth + 1) for item in value],
        }
    name = NUMPY_NAMES.get(kind)
    if name is not None:
        if name == "str_":
            encoded = str(value)
        elif name == "bool":
            encoded = bool(value)
        elif np.dtype(kind).kind in "iu":
            encoded = int(value)
        else:
            encoded = repr(float(value))
        return {"type": f"numpy:{name}", "value": encoded}
    raise TypeError(
        f"{what} {value!r:.200} has type {kind.__module__}.{kind.__qualname__}, which "
        "skcrf model files cannot store safely. Supported types: str, int, float, "
        "bool, None, bytes, tuples, lists and str-keyed dicts of these, and numpy "
        "bool, integer, float16/32/64 and str_ scalars."
    )


def decode_float(value, what):
    if type(value) is int or type(value) is float:
        return float(value)
    if type(value) is str and value == value.strip() and "_" not in value:
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"{what}: invalid float value {value!r:.100}.")


def decode_int(value, what):
    if type(value) is not int:
        raise ValueError(f"{what}: invalid int value {value!r:.100}.")
    return value


_NONE = {"type": "none"}


#: What :func:`plain_value` answers for anything else.
NOT_PLAIN = object()


def plain_value(item):
    """The value of a tagged none, str or bool; :data:`NOT_PLAIN` for anything else.

    A model's parameters and labels are mostly these: answered before
    :func:`decode_value`'s general checks, and before its caller words a
    message (they cost about a tenth of opening a small model).
    """
    if type(item) is dict:
        if item == _NONE:
            return None
        if len(item) == 2:
            kind, value = item.get("type"), item.get("value")
            if (kind == "str" and type(value) is str) or (kind == "bool" and type(value) is bool):
                return value
    return NOT_PLAIN


def decode_value(item, what, depth=0):
    """Inverse of :func:`encode_value`; ValueError on anything unexpected."""
    value = plain_value(item)
    if value is not NOT_PLAIN:
        return value
    if type(item) is not dict or type(item.get("type")) is not str:
        raise ValueError(
            f"{what}: expected a tagged value {{'type': ..., 'value': ...}}, got {item!r:.200}."
        )
    kind = item["type"]
    expected_keys = {"type"} if kind == "none" else {"type", "value"}
    if set(item) != expected_keys:
        raise ValueError(
            f"{what}: a tagged value of type {kind!r:.50} must have exactly the keys "
            f"{sorted(expected_keys)}; got {sorted(item)!r:.200}."
        )
    value = item.get("value")
    if kind == "str":
        if type(value) is str:
            return value
    elif kind == "int":
        return decode_int(value, what)
    elif kind == "float":
        return decode_float(value, what)
    elif kind == "bool":
        if type(value) is bool:
            return value
    elif kind == "none":
        return None
    elif kind == "bytes":
        if type(value) is str:
            try:
                return bytes.fromhex(value)
            except ValueError:
                pass
    elif kind in ("tuple", "list", "dict"):
        if type(value) is (dict if kind == "dict" else list):
            if depth >= _MAX_DEPTH:
                raise ValueError(f"{what}: values nested more than {_MAX_DEPTH} deep.")
            if kind == "dict":
                return {key: decode_value(v, what, depth + 1) for key, v in value.items()}
            items = [decode_value(v, what, depth + 1) for v in value]
            return tuple(items) if kind == "tuple" else items
    elif kind.startswith("numpy:") and kind[6:] in NUMPY_TYPES:
        name = kind[6:]
        scalar_type = NUMPY_TYPES[name]
        if name == "str_":
            if type(value) is str:
                return np.str_(value)
        elif name == "bool":
            if type(value) is bool:
                return np.bool_(value)
        elif np.dtype(scalar_type).kind in "iu":
            number = decode_int(value, what)
            info = np.iinfo(scalar_type)
            if not info.min <= number <= info.max:
                raise ValueError(f"{what}: {number} is out of the range of {name}.")
            return scalar_type(number)
        else:
            number = decode_float(value, what)
            converted = scalar_type(number)
            if math.isfinite(number) and float(converted) != number:
                raise ValueError(f"{what}: {value!r:.100} is not exactly a {name}.")
            return converted
    else:
        raise ValueError(f"{what}: unknown value type {kind!r:.60}.")
    raise ValueError(f"{what}: invalid value {value!r:.200} for type {kind!r}.")


def is_hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


def no_duplicate_keys(pairs):
    result = dict(pairs)  # (built in C: the loop below runs only for a bad file)
    if len(result) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate JSON key {key!r:.100}.")
            seen.add(key)
    return result


def reject_constant(name):
    raise ValueError(f"invalid JSON constant {name}.")
