"""The two roots of failure (../shared/STYLE.md).

`IrtraceError` is the user's input being wrong: the CLI prints its one line and exits 2.
Anything else is an internal bug: full traceback.
"""
import difflib

from backends._runtime.text import strip_ansi  # noqa: F401 - re-exported: the workers' error text uses it too


class IrtraceError(Exception):
    """Bad user input or environment: one line, names what and where, and the fix."""


def printable(text):
    """`text` safe for a terminal, on one line: control characters (ANSI escapes, newlines, carriage
    returns, bidi overrides: anything not printable) are shown escaped, as Python writes them."""
    text = str(text)
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def suggest(name, choices, n=3):
    """' Did you mean: a, b?' for close matches of `name` among `choices`, or ''."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=n, cutoff=0.5)
    return f" Did you mean: {', '.join(close)}?" if close else ""


def interrupt_in(error):
    """The KeyboardInterrupt (Ctrl-C, or the CLI's SIGTERM) in `error`'s chain of causes and contexts, or
    None: a library that catches an interrupt and raises its own error (torch.export does) must not turn
    it into an error message."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None
