"""The reference's and the oracle's results, computed once per bundle and kept beside it.

Replaying backend B after backend A costs B's compute and the comparisons: torch and float64 give the
same answers on the same node every time. BUNDLE.cache/ holds one safetensors file per call (its
arrays, and its status and reply as metadata), named by a hash of everything that decides the answer:
the bundle's content (Bundle.content_key), the code and versions that compute it (every backends/
source file, irtrace's version, the worker's module, environment and interpreter, torch's and onnx's
versions) and the call itself (the node, its attributes, the mode, which directions are in s, what
else is asked). Only answers are kept (ok, UNSUPPORTED): a crash or a timeout is asked again. A
bundle folder that cannot be written next to runs without a cache (logged). How an answer is kept in its
file and read back, the same bits (a recorded value named, float64 kept in float32 where it is one, the
oracle's result as its difference from the reference's): irtrace/replay/entry.py. A replay's
entries are written behind, by a thread of the cache's own, while the replay goes on (at most BEHIND
bytes of answers wait; an answer put and not yet written is served from memory); the replay's end
waits for them, then packs the small answers it verified into one file that the next replay reads once
(irtrace/replay/pack.py: served only while each entry's file is the one packed). A replay that writes entries
lists them under its code (<key>.entries) and removes the entries of the codes replayed before the last two
(CODES_KEPT): an upgrade of irtrace, torch or numpy is another code, whose first replay computes everything.

The reference's own rows (torch judged against float64) are a function of those answers, the policy
and the host's judging code: they are kept too (a JSON file per call, and one more where the oracle's
rounding estimate was asked for, named by a hash of the answer files' sizes and modification times,
the policy, every irtrace source file and the rest of what decides them), so a replay of the
reference reads them instead of judging again (judge.judge_all).

Nothing in BUNDLE.cache/ is trusted as it is (irtrace/envs/trust.py): every file is signed with an HMAC under
this user's key (an answer over its status, reply and every byte of its arrays; judged rows over their
text), and an entry whose signature does not verify is computed again. File names carry the key's
fingerprint, so a cache copied from another bundle, user or machine is never read; the bundle's content
key hashes every byte of its value store, so an edit that keeps the file's size and modification time
is another key. Verifying an answer reads every byte of it (ResNet-50's answers are 1.5 GB): once
an answer verified, its identity (device, inode, size, modification and change time) is
remembered, signed, in the user's cache folder (`verified/`), and a later replay that finds the file
with that identity does not verify it again. Any write to it, and any os.utime after one, sets its change
time to the clock's now, which no user can choose; an answer changed less than 2 s before it was
verified is verified again next time (a write in the same clock tick keeps its identity).
"""
import functools
import hashlib
import hmac
import json
import logging
import os
import re
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

import numpy as np

from backends._runtime.wire import Status
from irtrace import compare
from irtrace.envs import trust
from irtrace.errors import IrtraceError
from irtrace.replay import backends as registry
from irtrace.replay import entry, pack
from irtrace.version import __version__

log = logging.getLogger(__name__)
REFERENCE_ROLE, ORACLE_ROLE = registry.reference(), registry.oracle()
ROOT = Path(__file__).resolve().parents[2]
KEPT = (Status.OK, Status.UNSUPPORTED)  # answers; a crash or a timeout is asked again


@functools.cache
def _code_key():
    """The code and versions that compute the cached answers (read once per process)."""
    h = hashlib.sha256(__version__.encode())
    for p in sorted((ROOT / "backends").rglob("*.py")):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    for dist in ("torch", "onnx", "numpy", "ml_dtypes"):
        try:
            h.update(f"{dist} {metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            pass
    return h.hexdigest()


@functools.cache
def _judging_key():
    """The host code that judges (every irtrace source file), on top of the answers' code."""
    h = hashlib.sha256(_code_key().encode())
    for p in sorted((ROOT / "irtrace").rglob("*.py")):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=16)
def _policy_text(policy):
    """A (frozen) policy as the judged rows' key holds it: asked per call, made once."""
    return json.dumps(asdict(policy), sort_keys=True)


def _number(v):
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"{type(v).__name__} in a judged row")


def _worker_key(name):
    info = registry.get(name)
    return json.dumps([info.name, info.worker, sorted(info.variables().items()), info.interpreter(),
                       [str(p) for p in info.extra_path]])


# how entries are written: in their names, so that an irtrace that writes (or reads) them otherwise never reads
# these (2: an oracle's result that is the reference's float32 result widened is named "same", not written)
ENTRIES = "2"
BEHIND = 256 << 20  # bytes of answers put and not yet written that a replay holds at most (behind=True)
USES = "uses.json"  # in the cache folder: each entry's last replay (a count), for ResultCache.trim
VERIFIED = "verified"  # in the user's cache folder: per cache, the answers already verified, by identity
CODES_KEPT = 2  # the codes whose entries a replay that writes keeps: its own and the one replayed last before it
_ENTRY_NAME = re.compile(r"[0-9a-f]{40}\.(safetensors|json)")  # what an entry's name is (_name); nothing else goes
_SETTLED_NS = 2 * 10**9  # an answer changed this recently is verified again next time


def _identity(path):
    st = os.stat(path)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _identity_or_none(path):
    try:
        return _identity(path)
    except OSError:
        return None


def _settled(identity):
    import time
    return time.time_ns() - max(identity[3], identity[4]) > _SETTLED_NS


def folder(bundle_path):
    """Where the cache of the bundle at `bundle_path` is kept: BUNDLE.cache/ beside it."""
    return Path(str(bundle_path).rstrip("/") + ".cache")


class ResultCache:
    """get(call, backend) -> its Answer (irtrace/replay/execute.py) or None; put(call, backend, Answer). `backends`: the
    roles cached (the reference and the oracle)."""

    def __init__(self, bundle, roles, limit=None, behind=False):
        self.dir = folder(bundle.path)
        self._root = os.path.join(str(self.dir), "")  # see _file
        # behind=True: entries are written by a thread of their own while the replay goes on (drain, replayed)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="irtrace-cache") if behind else None
        self._pending = {}  # entry name -> the Answer put and not written yet (get serves it)
        self._refs, self._refs_lock = OrderedDict(), threading.Lock()  # see _remember
        self._waiting = set()  # oracle entries kept against a reference's answer not here when they were read
        self._held, self._room_cv = 0, threading.Condition()
        self.values = bundle.values  # an answer that is a recorded value bit for bit names it (put)
        self.limit = limit  # bytes the folder may hold after a replay (None: no limit); see trim
        self.used = set()   # the entries this replay read or wrote
        self.room = None    # bytes this replay may still write (put: half the disk's free space at its first)
        # without a key nothing can be verified: nothing is read or kept
        self.usable = trust.available()
        base = hashlib.sha256((bundle.content_key + _code_key() + trust.fingerprint() + ENTRIES).encode())
        self.marker = self.dir / f"{base.hexdigest()[:40]}.replayed"
        self.pack = self.dir / f"{base.hexdigest()[:40]}.pack"  # the small answers in one file (pack.py)
        self.listing = self.dir / f"{base.hexdigest()[:40]}.entries"  # every entry of this code (_list_and_evict)
        self._wrote = False  # whether this replay wrote an entry
        self._packed = None  # name -> (identity, metadata, arrays) of the pack's entries, read at the first get
        self.keys = {}
        for role in roles:
            h = base.copy()
            h.update(_worker_key(role).encode())
            self.keys[role] = h
        self.writable = self.usable
        # answers whose every byte was verified, by identity: name -> [dev, ino, size, mtime_ns, ctime_ns]
        self.index = trust.cache_root() / VERIFIED / (
            hashlib.sha256(os.fsencode(os.path.abspath(self.dir))).hexdigest()[:40] + ".json")
        self._seen = None  # see seen
        self.newly = {}

    @property
    def seen(self):
        """The index's answers verified before (name -> identity), read when first needed: a replay whose answers
        all come from the pack (or that reads judged rows only) never reads it. It holds every answer this
        folder's replays verified, of every code (a 3000-node chain replayed by two codes: 12,000 entries, 1.4 MB
        of signed JSON)."""
        if self._seen is None:
            self._seen = self._read_index() if self.usable else {}
        return self._seen

    def _read_index(self):
        text = _verified(self.index)
        try:
            seen = json.loads(text) if text is not None else {}
        except ValueError:
            return {}
        return seen if isinstance(seen, dict) else {}

    def _keep_index(self):
        """Add the answers verified in this replay to the index (read again first: another replay may
        have added its own meanwhile; one lost in a race is only verified once more)."""
        if not self.newly:
            return
        text = json.dumps({**self._read_index(), **self.newly}, sort_keys=True)
        tmp = self.index.with_name(f".{self.index.name}.{os.getpid()}.tmp")
        try:
            self.index.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(_signed(self.index.name, text))
            os.replace(tmp, self.index)
            self.newly = {}
        except OSError as e:  # a read-only cache folder: verified again next time
            log.info("%s: cannot keep the verified answers (%s)", self.index, e)
            try:
                tmp.unlink()
            except OSError:
                pass

    def warm(self):
        """Whether an earlier replay of this bundle with this code left its answers here (then the
        reference and the oracle start only when one is missing)."""
        return self._kept() is not None

    def replayed(self, versions):
        """Mark the end of a replay that kept its answers; keep the cached roles' versions (a later
        replay that starts neither reports them)."""
        self.close()
        if self.writable and self.dir.is_dir():
            # each versions dict in the order its worker gave it: a cached report is the same bytes
            kept = {role: versions[role] for role in self.keys if role in versions}
            text = json.dumps(kept)
            self._write(self.marker, lambda tmp: tmp.write_text(_signed(self.marker.name, text)))
            if self.limit is not None:
                self.trim(self.limit)
            self._repack()
            # a replay that wrote entries, or verified some (an interrupted replay's, which no listing may name yet)
            if self._wrote or self.newly or not self.listing.exists():
                self._list_and_evict()
        if self.usable:
            self._keep_index()

    def _listed(self, path):
        """The entry names a code's listing (<key>.entries) holds; empty when it is absent or unreadable."""
        try:
            names = json.loads(path.read_text())
        except (OSError, ValueError):
            return set()
        return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()

    def _list_and_evict(self):
        """Add the entries this replay used to its code's listing, and remove the entries of the codes replayed
        before the last CODES_KEPT (each irtrace, torch or numpy version, each edit of backends/, is a code: its
        entries are never read by another, and without this the folder grew by an all-modes replay's answers
        with each). A code is as recent as its last replay (its marker's time); one whose marker has no listing
        (an older irtrace's) or is not signed by this user's key (another user's, in a shared folder) is left
        alone. A listing only names what goes, among the folder's own entries (a name that is not an entry's is
        never removed), so an edited one can only make more be computed again."""
        mine = self._listed(self.listing)
        names = mine | {n for n in self.used if _ENTRY_NAME.fullmatch(n)}
        if names != mine and not self._write(self.listing, lambda tmp: tmp.write_text(json.dumps(sorted(names)))):
            return
        others = []
        for marker in self.dir.glob("*.replayed"):
            listing = marker.with_suffix(".entries")
            if marker.name != self.marker.name and listing.exists() and _verified(marker) is not None:
                try:
                    others.append((marker.stat().st_mtime_ns, marker, listing))
                except OSError:
                    pass
        others.sort(reverse=True)  # the most recently replayed first
        keep = set(names)
        for _, _, listing in others[:CODES_KEPT - 1]:
            keep |= self._listed(listing)
        for _, marker, listing in others[CODES_KEPT - 1:]:
            gone = [self.dir / name for name in self._listed(listing) - keep if _ENTRY_NAME.fullmatch(name)]
            try:
                for path in gone + [marker.with_suffix(".pack"), marker, listing]:  # its listing last: kept until done
                    path.unlink(missing_ok=True)
            except OSError as e:  # a file this user may not remove: the rest of that code stays, the replay is done
                log.info("%s: the entries of an older code were not all removed (%s)", self.dir, e)
                continue
            log.info("%s: removed the entries of a code replayed before the last %d (%s)", self.dir, CODES_KEPT,
                     marker.stem)

    def _packed_entries(self):
        """The pack's entries whose files have the identity they had when packed, each file asked once, as the
        pack is read: a stat per answer served cost 16 us inside a replay's node loop here (the reply reader
        and the worker busy beside it), 2 us in a row (benchmarks/fixed_cost.py)."""
        if self._packed is None:
            held = pack.read(self.pack) if self.usable else {}
            self._packed = {name: e for name, e in held.items() if _identity_or_none(self._file(name)) == e[0]}
        return self._packed

    def _repack(self):
        """Pack (pack.py) the small answers this replay used whose every byte was verified, and those the pack
        held whose files are unchanged; not written again when that is what it holds. With a size limit
        (--cache-size) there is no pack: the limit is the entries'."""
        if self.limit is not None:
            self.pack.unlink(missing_ok=True)
            return
        if not any(n.endswith(".safetensors") for n in self.used):
            return  # no answer read or written (a replay of torch alone reads its judged rows): nothing new to pack
        held, entries = self._packed_entries(), {}
        for name in sorted(n for n in self.used | set(held) if n.endswith(".safetensors")):
            path = self._file(name)
            # an entry of the pack had its identity when the pack was read: not asked again. Its file changed since
            # is packed with the identity it had: the next replay's stat differs, and reads it
            now = held[name][0] if name in held else _identity_or_none(path)
            if now is None or now[2] > pack.PACKED_MAX:
                continue
            if name in held and held[name][0] == now:
                entries[name] = held[name]
            elif self.newly.get(name, self.seen.get(name)) == now:
                try:
                    read = entry.read_known(path, now)
                except (OSError, ValueError, KeyError, TypeError):
                    read = None
                if read is not None:
                    entries[name] = (now, *read)
        if {n: e[0] for n, e in entries.items()} != {n: e[0] for n, e in held.items()}:
            if not entries:
                self.pack.unlink(missing_ok=True)
            elif not pack.write(self.pack, entries, self._write):
                log.info("%s: the small answers were not packed", self.dir)

    def trim(self, limit):
        """Remove entries until the folder holds at most `limit` bytes: first those no replay has used for
        the longest (USES: each entry's last replay, a count kept in the folder), the largest first among
        equals; the entries this replay used last of all. The next replay computes what is gone again.
        USES only orders what goes: it names nothing that is removed (the folder's own listing does), so a
        forged one can only make more be computed again."""
        uses_path = self.dir / USES
        try:
            uses = json.loads(uses_path.read_text())
            uses = {k: v for k, v in uses.items() if isinstance(v, int)} if isinstance(uses, dict) else {}
        except (OSError, ValueError):
            uses = {}
        now = max(uses.values(), default=0) + 1
        entries, total = [], 0
        for p in self.dir.iterdir():
            try:
                size = p.stat().st_size
            except OSError:
                continue
            if p.name == USES:
                continue
            total += size  # every file counts (the marker; USES, below), only entries go
            if p.suffix in (".safetensors", ".json") and not p.name.startswith("."):
                entries.append((now if p.name in self.used else uses.get(p.name, 0), -size, p))
        # USES as it will be written, at most (it lists what stays)
        total += len(json.dumps({p.name: last for last, _, p in entries}, sort_keys=True))
        for _, size, p in sorted(entries, key=lambda e: (e[0], e[1], e[2].name)):
            if total <= limit:
                break
            try:
                p.unlink()
                total += size
            except OSError:
                pass
        kept = {p.name: (now if p.name in self.used else uses.get(p.name, 0)) for _, _, p in entries if p.exists()}
        self._write(uses_path, lambda tmp: tmp.write_text(json.dumps(kept, sort_keys=True)))
        if total > limit:
            log.info("%s: %d bytes of this replay's own entries kept over the %d byte limit", self.dir, total, limit)

    def versions(self):
        """The cached roles' versions an earlier replay kept ({} when none is, or not verified)."""
        return self._kept() or {}

    def _kept(self):
        text = _verified(self.marker) if self.usable else None
        try:
            kept = json.loads(text) if text is not None else None
        except ValueError:
            return None
        return kept if isinstance(kept, dict) else None

    def _path(self, call, role, h=None, suffix="safetensors"):
        return self.dir / self._name(call, role, h, suffix)

    def _name(self, call, role, h=None, suffix="safetensors"):
        """The file name of `role`'s entry of `call` (`h`: the hash to name it by instead, judged rows')."""
        if h is None:  # made once per call and key (this cache's of the role: held here, so its id is not reused)
            key = ("cache entry", self.keys[role], suffix)
            name = call.derived.get(key)
            if name is None:
                name = call.derived[key] = self._name(call, role, self.keys[role].copy(), suffix)
            return name
        h.update(call.key_text.encode())
        return f"{h.hexdigest()[:40]}.{suffix}"

    def _file(self, name):
        """The path of the entry `name`, as a string: a replay asks for three to five a node, and pathlib's
        objects cost 10-20 us each to make and to turn into the string a system call takes (fixed_cost.py)."""
        return self._root + name

    def _judged_name(self, call, policy, basis):
        """The file name the rows judged from `basis` are kept under, or None when an answer they come from is not
        here. `basis`: {"answers": [(call, role)...] the rows were judged from, and anything else that
        decides them (JSON-able)}; each answer file's size and modification time are in the key, so
        an answer computed again (a torn entry) is judged again."""
        h = hashlib.sha256(f"judged {_judging_key()} {_policy_text(policy)}".encode())
        for c, role in basis["answers"]:
            answer = self._name(c, role)
            try:
                st = os.stat(self._file(answer))
            except OSError:
                return None
            h.update(f"{answer} {st.st_size} {st.st_mtime_ns}".encode())
        h.update(json.dumps({k: v for k, v in basis.items() if k != "answers"}, sort_keys=True).encode())
        return self._name(call, None, h, "json")

    def judged(self, call, policy, basis):
        """The reference's rows of `call` as an earlier replay judged them against float64 from the same
        answers (`basis`, see _judged_name) with this policy and code, or None."""
        name = self._judged_name(call, policy, basis)
        if name is None:
            return None
        text = _verified(self._file(name))
        if text is None:  # absent, torn, edited or another user's: judged again
            return None
        try:
            rows = [compare.Result.from_json(r) for r in json.loads(text)]
            self.used.add(name)
            return rows
        except Exception as e:  # noqa: BLE001 - signed but unreadable (another irtrace's schema): judged again
            log.info("%s: unreadable judged rows (%s); judging again", self._file(name), e)
            return None

    def keep_judged(self, call, policy, basis, rows):
        if not self.writable:
            return
        try:  # numpy scalars as the numbers they hold; inf and NaN as JSON's extension (read back as they were)
            text = json.dumps([r.to_json() for r in rows], default=_number)
        except (TypeError, ValueError) as e:
            log.info("%s: not keeping the judged rows of %s %s (%s)", self.dir, call.spec.name, call.mode, e)
            return

        def write():  # after the answers put before (the rows' key reads their files)
            name = self._judged_name(call, policy, basis)
            if name is None:
                return
            path = self.dir / name
            if self._write(path, lambda tmp: tmp.write_text(_signed(path.name, text))):
                self.used.add(path.name)
                self._wrote = True
            else:
                log.info("%s: not keeping the judged rows of %s %s", self.dir, call.spec.name, call.mode)
        self._later(write)

    def _later(self, write, nbytes=0):
        """`write()` on the writer thread, after every write asked for before (behind=True), holding at
        most BEHIND bytes of answers not yet written (more waits); now, without it."""
        if self._writer is None:
            write()
            return
        with self._room_cv:
            while self._held and self._held + nbytes > BEHIND:
                self._room_cv.wait()
            self._held += nbytes

        def run():
            try:
                write()
            except Exception as e:  # noqa: BLE001 - an entry not kept is computed again; the replay goes on
                log.warning("%s: a cache entry was not kept (%s: %s)", self.dir, type(e).__name__, e)
            finally:
                with self._room_cv:
                    self._held -= nbytes
                    self._room_cv.notify_all()
        self._writer.submit(run)

    def drain(self):
        """Every write asked for so far done."""
        if self._writer is not None:
            self._writer.submit(lambda: None).result()

    def close(self):
        """Every write asked for done, and the writer thread ended (put writes at once from now on)."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)
            self._writer = None

    def has(self, call, role):
        """Whether `role`'s entry of `call` is here (read or not: get says whether it serves)."""
        return role in self.keys and self.usable and os.path.exists(self._file(self._name(call, role)))

    def get(self, call, role):
        if role not in self.keys or not self.usable:
            return None
        name = self._name(call, role)
        pending = self._pending.get(name)
        if pending is not None:  # put by this replay, not written yet: the same answer
            return pending
        path = self._file(name)
        packed = self._packed_entries().get(name)
        if packed is not None:  # its file unchanged since it was packed
            return self._answer_of(call, role, name, packed[1], packed[2], True, None)
        try:
            known = entry.read_known(path, self.seen.get(name))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as e:  # torn or changed while read: the slow path says
            log.info("%s: %s; reading it again", path, e)
            known = None
        if known is not None:
            meta, out = known
            return self._answer_of(call, role, name, meta, out, True, None)
        if not os.path.exists(path):
            return None
        from irtrace.store import LazyValues
        try:
            before = _identity(path)
            if before[2] <= entry.SMALL:  # a copy is cheaper than mapping and validating a small file
                from safetensors import safe_open
                with safe_open(str(path), framework="numpy") as f:
                    metadata = f.metadata()
                    meta = json.loads(metadata["irtrace"])
                    held = set(f.keys())
                    out = [f.get_tensor(str(k)) if str(k) in held else None for k in range(entry.stored(meta))]
            else:  # memory-mapped, validated like a bundle's value store (safetensors' get_tensor copies)
                f = LazyValues(path)
                metadata = f.metadata
                meta = json.loads(metadata["irtrace"])
                out = [f[str(k)] if str(k) in f else None for k in range(entry.stored(meta))]
            known = self.seen.get(name) == before == _identity(path)  # verified before, unchanged since
            signed = None if known else entry.signer(name, metadata["irtrace"], out)
        except Exception as e:  # noqa: BLE001 - a torn or foreign file (SafetensorError and others): asked again
            log.info("%s: unreadable cache entry (%s); computing it again", path, e)
            return None
        if not known and (signed is None or not hmac.compare_digest(signed.hexdigest(), str(metadata.get("sig")))):
            log.info("%s: cache entry not signed by this user's key (edited, or written elsewhere); computing "
                     "it again", path)
            return None
        return self._answer_of(call, role, name, meta, out, known, before)

    def _answer_of(self, call, role, name, meta, out, known, before):
        """The Answer of the entry `name` read (its `meta` and arrays `out`), verified or `known` (verified
        before: `before` is its identity when it was not)."""
        based = bool(meta.get("delta") or meta.get("same"))
        base = self._base(call, meta.get("base")) if based else None
        if based and base is None:
            log.info("%s: the reference's answer it is kept against is not here (or another); computing it again "
                     "unless the reference's, computed now, is that one", self._file(name))
            self._waiting.add(name)
            return None
        if not known and _settled(before) and _identity(self._file(name)) == before:
            self.newly[name] = before
        self.used.add(name)
        answer = entry.decoded(meta, out, self.values, base)
        if role == REFERENCE_ROLE and answer is not None and meta.get("digest"):
            self._remember(name, meta["digest"], answer)
        return answer

    def waits(self, call, role):
        """Whether `role`'s entry of `call` was just found kept against the reference's answer of the call, and
        that answer is not here: the reference computing it again may give it (a torn or trimmed entry)."""
        return self._name(call, role) in self._waiting if role in self.keys else False

    def _remember(self, name, digest, answer):
        """Keep the reference's answer just read or written (the oracle's of the same call is read or written
        next, against it): the last few, by entry name, with the digest of their results (entry.digest)."""
        with self._refs_lock:
            self._refs[name] = (digest, answer.results)
            self._refs.move_to_end(name)
            while len(self._refs) > 8:
                self._refs.popitem(last=False)

    def _base(self, call, digest):
        """The reference's results of `call` when their digest is `digest` (as remembered, put by this replay
        and not written yet, or read from its entry), or None."""
        if REFERENCE_ROLE not in self.keys:
            return None
        kept = self._reference_kept(call)
        if kept is None or kept[0] != digest:
            pending = self._pending.get(self._name(call, REFERENCE_ROLE))
            if pending is not None and pending.ok:  # computed again by this replay (its entry was torn)
                kept = (entry.digest(pending.results), pending.results)
            elif self.get(call, REFERENCE_ROLE) is not None:
                kept = self._reference_kept(call)
        return kept[1] if kept is not None and kept[0] == digest else None

    def put(self, call, role, answer):
        if role not in self.keys or not self.writable or answer.status not in KEPT:
            return
        path = self._path(call, role)
        if self._writer is None:
            self._put(path, call, role, answer)
            return
        self._pending[path.name] = answer

        def write():
            try:
                self._put(path, call, role, answer)
            finally:
                self._pending.pop(path.name, None)
        self._later(write, sum(a.nbytes for a in answer.arrays() if a is not None))

    def _put(self, path, call, role, answer):
        from irtrace.store import write_values  # safetensors' format, written without a copy of each array
        ref = self._reference_kept(call) if role == ORACLE_ROLE else None
        tensors, meta, digest, stored = entry.encode(call, role, answer, self.values, ref)
        signed = entry.signer(path.name, meta, [tensors.get(str(k)) for k in range(stored)])
        if signed is None:
            return
        metadata = {"irtrace": meta, "sig": signed.hexdigest()}
        nbytes = sum(a.nbytes for a in tensors.values())
        if not self._fits(nbytes):
            return
        if self._write(path, lambda tmp: write_values(tmp, tensors, metadata)):
            self.used.add(path.name)
            self._wrote = True
            self.room -= nbytes
            if digest:
                self._remember(path.name, digest, answer)
        else:
            self.writable = False
            log.info("%s: not caching the reference and oracle results", self.dir)

    def _reference_kept(self, call):
        """(digest, results) of the reference's entry of `call` as this replay read or wrote it, or None."""
        name = self._name(call, REFERENCE_ROLE) if REFERENCE_ROLE in self.keys else None
        with self._refs_lock:
            return self._refs.get(name)

    def _fits(self, nbytes):
        """Whether an answer of `nbytes` may be written: a replay's answers take at most half the free space
        of the disk the cache is on, as it was at the first (the answers are larger than the bundle: ResNet-50's
        1.4x it, which for a 1.1B-parameter model's 26 GB bundle is about 37 GB). Past it, this replay keeps no
        more (logged once); the verdicts are the same, the next replay computes what is missing. An answer put
        before the one that did not fit and written after it (the writer thread lags behind a busy replay) is not
        kept either."""
        if not self.writable:
            return False
        if self.room is None:
            try:
                st = os.statvfs(self.dir.parent)
                self.room = st.f_bavail * st.f_frsize // 2
            except OSError:
                self.room = float("inf")
        if nbytes <= self.room:
            return True
        if self.writable:
            log.warning("%s: keeping no more answers in this replay: the next is %d bytes and half of the disk's "
                        "free space is %d bytes (--cache-size, or --no-cache)", self.dir, nbytes, self.room)
            self.writable = False
        return False

    def _write(self, path, write):
        """`write(tmp)`, then tmp renamed to `path` (a reader never sees half a file); False (logged)
        where it cannot be written."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self.dir.mkdir(exist_ok=True)
            write(tmp)  # made 0666 less the umask, as any file (ValueWriter, write_text): no chmod
            os.replace(tmp, path)
            return True
        except Exception as e:  # noqa: BLE001 - a full disk, a read-only folder, a value the format cannot
            # hold (IrtraceError): the cache is an optimisation, the replay goes on
            from irtrace.store import write_failure
            if not (write_failure(e) or isinstance(e, (OSError, ValueError, TypeError, IrtraceError))):
                raise
            log.info("%s: cannot write %s (%s)", self.dir, path.name, e)
            try:
                tmp.unlink()
            except OSError:
                pass
            return False


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12}


def cache_limit(size, bundle_path):
    """Bytes from a --cache-size: a number of bytes (int), "500MB", "2G", "0", or "1.5x" (times the
    bundle's own size on disk; None where `bundle_path` is None: the text is only checked); IrtraceError
    for anything else."""
    import re
    if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
        return size
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(size))
    unit = m.group(2).lower() if m else None
    if m is None or (unit not in _UNITS and unit != "x"):
        raise IrtraceError(f"--cache-size {size!r}: give bytes (e.g. 500MB, 2GB) or a multiple of the bundle's "
                           f"size (e.g. 1.5x)")
    if unit == "x":
        if bundle_path is None:  # only checked
            return None
        folder = Path(bundle_path)
        return int(float(m.group(1)) * sum(p.stat().st_size for p in folder.iterdir() if p.is_file()))
    return int(float(m.group(1)) * _UNITS[unit])


def _signed(name, text):
    """A small cache file's content: the signature of (its name, `text`), a newline, then `text`."""
    return f"{trust.sign('cache file', name, text)}\n{text}"


def _verified(path):
    """The text of a small cache file written by _signed, or None (absent, torn, or not signed by this
    user's key under this name)."""
    try:
        sig, _, text = entry.read_file(path).decode().partition("\n")
    except (OSError, UnicodeDecodeError):
        return None
    return text if trust.verify(sig, "cache file", os.path.basename(path), text) else None
