"""What this machine has: the memory a step can still take, read before a step that could exceed it
(an export, a replayed call), so that it is refused with its reason instead of killed by the kernel."""
import os

GB = 1e9


def available_bytes():
    """MemAvailable of /proc/meminfo (what can be allocated without swapping), or None where there is
    none (not Linux): then nothing is refused. $IRTRACE_MEMORY_AVAILABLE (bytes) overrides it, to run
    where the kernel's figure is not the process's (a container's own limit) or to check a refusal."""
    given = os.environ.get("IRTRACE_MEMORY_AVAILABLE")
    if given:
        return float(given)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def size_text(nbytes):
    if nbytes >= 0.1 * GB:
        return f"{nbytes / GB:.2f} GB"
    return f"{nbytes / 1e6:.2f} MB" if nbytes >= 1e5 else f"{nbytes / 1e3:.1f} kB"
