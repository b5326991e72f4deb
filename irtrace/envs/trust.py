"""What irtrace keeps between runs may only be trusted when this user wrote it on this machine.

The reference/oracle cache beside a bundle (BUNDLE.cache/), the digests of bundles' value stores and
`--resume`'s journal (OUT/journal.jsonl) are files anyone with write access to those folders can edit,
copy from another bundle or ship in a tarball. Each entry irtrace writes is signed with an HMAC-SHA256
keyed by a secret of this user's, made once and kept in the user's cache folder
($IRTRACE_CACHE, else $XDG_CACHE_HOME/irtrace, else ~/.cache/irtrace) as `key`, mode 0600. An entry
whose signature does not verify is never used: it is computed again. So nothing another user, another
machine or an editor wrote can change a verdict; the user who owns the key can, as they can change
irtrace itself.

Files irtrace hands to people (bundles, the cache, reports) get the permissions the user's umask gives
(`shared_mode`), as any file the user makes; the key alone is private.
"""
import functools
import hashlib
import hmac
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)
KEY_NAME = "key"
KEY_BYTES = 32


def cache_root():
    """The user's cache folder of irtrace: $IRTRACE_CACHE, else $XDG_CACHE_HOME/irtrace, else ~/.cache/irtrace."""
    base = os.environ.get("IRTRACE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "irtrace")
    return Path(base)


def umask():
    """This process's umask now (read without changing it where /proc says it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc: the classic read (set, then put back)
    os.umask(mask)
    return mask


def shared_mode(path, folder=None):
    """Give `path` the mode a file (0666) or folder (0777) made by this user gets under their umask:
    tempfile.mkdtemp makes 0700 folders and safetensors 0600 files, unreadable to a team sharing a
    machine. `folder`: None to ask the filesystem."""
    folder = os.path.isdir(path) if folder is None else folder
    os.chmod(path, (0o777 if folder else 0o666) & ~umask())


def _key_path():
    return cache_root() / KEY_NAME


@functools.cache
def key():
    """(the user's secret, None) or (None, why it cannot be used). Made on first use: 32 random bytes,
    written to a private file and linked into place, so two processes starting at once agree on one."""
    path = _key_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            tmp = path.with_name(f".{KEY_NAME}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, os.urandom(KEY_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # never replaces a key another process made meanwhile
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            st = os.fstat(fd)
            data = os.read(fd, KEY_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as e:
        return None, f"cannot make or read {path} ({e.strerror or e})"
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        return None, f"{path} is not a file of this user"
    if st.st_mode & 0o077:
        return None, f"{path} can be read or written by others (mode {stat.S_IMODE(st.st_mode):o}); run: chmod 600 {path}"
    if len(data) != KEY_BYTES:
        return None, f"{path} does not hold a {KEY_BYTES}-byte key; remove it (a new one is made)"
    return data, None


def available():
    """Whether entries can be signed and verified (the key exists and is private)."""
    secret, why = key()
    if secret is None:
        _warn_once(why)
    return secret is not None


@functools.cache
def _warn_once(why):
    log.warning("no signing key (%s): nothing is cached or resumed", why)


@functools.cache
def fingerprint():
    """A short public name of the key (cache file names carry it: other users' entries are never even read)."""
    secret, _ = key()
    return hashlib.sha256(b"irtrace key fingerprint " + (secret or b"")).hexdigest()[:16]


def signer(*parts):
    """An HMAC over `parts` (str or bytes, each length-prefixed, so no two lists of parts sign alike), to
    update() with more data (arrays); None without a key."""
    secret, _ = key()
    if secret is None:
        return None
    h = hmac.new(secret, digestmod=hashlib.sha256)
    _feed(h, parts)
    return h


def _feed(h, parts):
    for p in parts:
        b = p.encode() if isinstance(p, str) else bytes(p)
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)


def sign_after(h, *parts):
    """sign(*before, *parts), where `h` is signer(*before), itself left as it is: the parts before are hashed
    once for many signatures (a journal signs each line after the same two parts; a new HMAC for each line was
    a third of what appending the line cost)."""
    h = h.copy()
    _feed(h, parts)
    return h.hexdigest()


def sign(*parts):
    """Hex HMAC-SHA256 of `parts` under the user's key, or None without one."""
    h = signer(*parts)
    return h.hexdigest() if h is not None else None


def verify(signature, *parts):
    """Whether `signature` (hex) is this user's signature of `parts`."""
    want = sign(*parts)
    return isinstance(signature, str) and want is not None and hmac.compare_digest(signature, want)
