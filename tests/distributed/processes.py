"""What the Ray tests check about processes, read from /proc independently of metaeval's code:
the addresses a set of processes listens on, a process's descendants, and which of them still run."""

import ipaddress
import os
import time
from pathlib import Path


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/{tcp,udp}{,6} write it (32-bit words in little-endian order); an
    IPv4-mapped one (``::ffff:127.0.0.1``, of a dual-stack socket) as the IPv4 address."""
    raw = bytes.fromhex(hex_address)
    address = ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))
    return getattr(address, "ipv4_mapped", None) or address


def listening(pids) -> list[tuple[int, ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """``(pid, address, port)`` of every TCP socket listening, and UDP socket bound, in ``pids``."""
    owner = {}
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                owner[link[len("socket:["):-1]] = pid
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if inode in owner and (table.startswith("udp") or state == "0A"):  # 0A: LISTEN
                host, port = local.split(":")
                found.append((owner[inode], _address(host), int(port, 16)))
    return found


def live_processes():
    """{pid: (parent pid, start time)} of every live, non-zombie process."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] not in ("Z", "X"):
                table[int(entry)] = (int(fields[1]), fields[19])
    return table


def descendants(root):
    """[(pid, start time)] of the live processes descending from ``root``."""
    table, found, frontier = live_processes(), [], [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in table.items():
            if ppid == parent:
                found.append((pid, start))
                frontier.append(pid)
    return found


def still_alive(processes, wait=15.0):
    """The (pid, start time) pairs still running after waiting up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        table = live_processes()
        alive = [(pid, start) for pid, start in processes if table.get(pid, (None, None))[1] == start]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def describe(processes) -> list[str]:
    """``pid command`` of each of ``processes`` (``(pid, start time)``), for a failure's message."""
    lines = []
    for pid, _ in sorted(processes):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            command = "(ended)"
        lines.append(f"{pid} {command.strip()[:120]}")
    return lines
