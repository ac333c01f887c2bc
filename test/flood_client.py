#!/usr/bin/env python3
"""A flood of silent connections for test/flood_test.sh: keeps COUNT connections open to
127.0.0.1:PORT, saying nothing, and opens a new one whenever the server closes one, until
STOP_FILE exists (at most SECONDS). Writes READY_FILE once COUNT are open, and prints how
many it opened and how many the server closed. Only 127.0.0.1 is ever contacted."""
import os, selectors, socket, sys, time

port, count, seconds, ready_file, stop_file = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
sel = selectors.DefaultSelector()
opened = closed = 0
end = time.time() + seconds

def open_one():
    global opened
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
    except OSError:
        return False
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    opened += 1
    return True

live = 0
while live < count and time.time() < end:
    if open_one():
        live += 1
open(ready_file, "w").write("ready\n")
while time.time() < end and not os.path.exists(stop_file):
    for key, _ in sel.select(timeout=0.05):
        s = key.fileobj
        try:
            data = s.recv(4096)  # the challenge, then nothing until the server closes
        except OSError:
            data = b""
        if data:
            continue
        sel.unregister(s)
        s.close()
        closed += 1
        live -= 1
    while live < count and time.time() < end:
        if not open_one():
            break
        live += 1
print(f"flood: {opened} silent connections opened, {closed} closed by the server")
