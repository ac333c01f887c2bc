#!/usr/bin/env python3
# free_port.py [COUNT]: prints COUNT (default 1) distinct TCP ports, one per line, that
# 127.0.0.1 can bind now and that lie outside the kernel's ephemeral range
# (/proc/sys/net/ipv4/ip_local_port_range).
#
# A port from that range (what a bind to port 0 returns) is free only at that moment: the
# kernel hands ports from the same range to every connect() and every bind to port 0, so a
# test that binds its port seconds later can find it taken as the local end of some
# connection (fault_test.sh binds its second address only after the fault, and failed so
# after a job over UCX's tcp, which opens many connections). Outside the range only an explicit bind takes a
# port. Where the range leaves no room (it starts below 10000 and reaches 65535), ports
# come from a bind to port 0 as before.
#
# Tests run side by side (meson's parallel jobs, fault_pair_test.sh's two jobs), and a port
# that binds now is free for each of them until one binds it: two scripts picking at once
# could both take it. So every pick is written down for ten minutes (longer than any one
# run of a script that binds its port late) in a file shared by every test on this host,
# under a lock, and a port written there is not picked again meanwhile.
import fcntl
import os
import random
import socket
import sys
import tempfile
import time

HELD_SECONDS = 600
LEDGER = os.path.join(tempfile.gettempdir(), "ringreduce-test-ports")


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def bindable(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def any_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def held(lines, now):
    """The ports in the ledger's lines whose time is not up, as {port: until}."""
    ports = {}
    for line in lines:
        try:
            port, until = (int(x) for x in line.split())
        except ValueError:
            continue
        if until > now:
            ports[port] = until
    return ports


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    try:
        ledger = open(LEDGER, "a+")
    except OSError:  # another user's ledger: pick as if nothing were written down
        print("\n".join(str(p) for p in pick(count, {})))
        return
    with ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)  # released when the file closes
        ledger.seek(0)
        now = int(time.time())
        taken = held(ledger.read().splitlines(), now)
        ports = pick(count, taken)
        for port in ports:
            taken[port] = now + HELD_SECONDS
        ledger.seek(0)
        ledger.truncate()
        ledger.write("".join(f"{p} {t}\n" for p, t in taken.items()))
    print("\n".join(str(p) for p in ports))


def pick(count, taken):
    low, high = ephemeral_range()
    pool = list(range(max(10000, low - 16384), low)) + list(range(high + 1, 65536))
    random.shuffle(pool)
    ports = []
    for port in pool[:500]:  # bounded: a busy host still has free ports among these
        if len(ports) == count:
            break
        if port not in taken and bindable(port):
            ports.append(port)
    for _ in range(100):  # no room outside the range: what the kernel gives
        if len(ports) == count:
            break
        port = any_port()
        if port not in ports and port not in taken:
            ports.append(port)
    if len(ports) < count:
        sys.exit(f"free_port.py: found {len(ports)} of {count} free ports on 127.0.0.1")
    return ports


main()
