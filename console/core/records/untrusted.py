"""Input a person or another machine wrote (files, queue fields, engine output): JSON whose
every parser failure is one ``ValueError`` with a plain reason, so each reader refuses bad
input instead of crashing; names safe as one path component; text safe to print."""
from __future__ import annotations

import json
import re
from typing import Any

# a name that is safe as one path component: no separator, no leading dot, nothing a shell or a
# terminal reads specially (round ids are <UTC time>-<hex>; a few tests use short names)
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def loads(data: bytes | str) -> Any:
    """``json.loads``, with nesting too deep for the parser, numbers too long to convert and
    bytes that are not UTF-8 all reported as ``ValueError`` (json raises RecursionError for the first)."""
    try:
        return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except RecursionError:
        raise ValueError("not JSON this console reads: nested too deeply") from None
    except MemoryError:
        raise ValueError("not JSON this console reads: too large to hold in memory") from None
    except (ValueError, OverflowError) as e:      # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"not JSON: {e}") from None


def safe_name(text: str) -> bool:
    return bool(SAFE_NAME.fullmatch(text))


# C0 controls (except tab), DEL and C1 controls: shown escaped so that text from outside
# cannot drive the terminal or the TUI that displays it
CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0)]}


def printable(text: str) -> str:
    """``text`` with every control character shown escaped (``\\x1b``), on one line."""
    return text.translate(CONTROL)
