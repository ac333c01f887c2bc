#!/usr/bin/env python3
"""A hostile client for test/hostile_test.sh. It connects to HOST:PORT (retrying while the
port is closed, for at most SECONDS) and, each on its own connection: sends random bytes;
answers the challenge with a well-formed hello carrying a wrong HMAC; sends half a
handshake and then holds the connection open without a word; sends a frame header that
announces 4 GiB; connects and says nothing; says hello in the protocol version before this
one (an old build). It prints what it tried and how each ended.
Only 127.0.0.1 is ever contacted."""
import os, socket, struct, sys, threading, time

host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ready_file = sys.argv[4] if len(sys.argv) > 4 else None  # written once every attack is connected
assert host == "127.0.0.1", "this test only talks to loopback"
MAGIC, VERSION = 0x52524431, 7  # transport/handshake.h
results = []
connected = []
ATTACKS = []  # filled below, once the attacks are defined
lock = threading.Lock()

def connect():
    end = time.time() + seconds
    while time.time() < end:
        try:
            s = socket.create_connection((host, port), timeout=2)
            s.settimeout(10)
            with lock:
                connected.append(s)
                if len(connected) == len(ATTACKS) and ready_file:
                    open(ready_file, "w").write("ready\n")
            return s
        except OSError:
            time.sleep(0.01)
    return None

def ending(s):
    try:
        data = s.recv(4096)
        return "closed by the server" if not data else f"server said {len(data)} bytes then kept reading"
    except OSError as e:
        return f"server reset ({e.__class__.__name__})"

def garbage():
    s = connect()
    if not s: return "refused: the port was closed all along"
    s.sendall(os.urandom(4096))
    return ending(s)

def wrong_hmac():
    s = connect()
    if not s: return "refused: the port was closed all along"
    challenge = s.recv(24)
    hello = struct.pack("<IHHQiiI", MAGIC, VERSION, 1, 0, 1, 4, 0) + os.urandom(16) + os.urandom(32)
    s.sendall(hello)
    reply = s.recv(4096)
    status = struct.unpack("<I", reply[:4])[0] if len(reply) >= 4 else None
    return f"rejected with status {status}: {reply[40:].decode(errors='replace')}"

def half_handshake():
    s = connect()
    if not s: return "refused: the port was closed all along"
    s.recv(24)
    s.sendall(struct.pack("<IHH", MAGIC, VERSION, 1))  # 8 of 76 bytes, then silence
    start = time.time()
    result = ending(s)
    return f"{result} after {time.time() - start:.1f} s"

def four_gib():
    s = connect()
    if not s: return "refused: the port was closed all along"
    s.sendall(struct.pack("<IIQ", 1, 0, 4 << 30))
    s.shutdown(socket.SHUT_WR)
    return ending(s)

def old_version():
    s = connect()
    if not s: return "refused: the port was closed all along"
    s.recv(24)
    hello = struct.pack("<IHHQiiI", MAGIC, VERSION - 1, 1, 0, 1, 4, 0) + os.urandom(16) + os.urandom(32)
    s.sendall(hello)
    reply = s.recv(4096)
    status = struct.unpack("<I", reply[:4])[0] if len(reply) >= 4 else None
    return f"rejected with status {status}: {reply[40:].decode(errors='replace')}"

def silent():
    s = connect()
    if not s: return "refused: the port was closed all along"
    start = time.time()
    return f"{ending(s)} after {time.time() - start:.1f} s"

ATTACKS.extend((garbage, wrong_hmac, half_handshake, four_gib, silent, old_version))
threads = []
for attack in ATTACKS:
    def run(a=attack):
        try:
            results.append((a.__name__, a()))
        except Exception as e:  # the server may drop us at any point
            results.append((a.__name__, f"{e.__class__.__name__}: {e}"))
    t = threading.Thread(target=run)
    t.start()
    threads.append(t)
for t in threads:
    t.join()
for name, outcome in sorted(results):
    print(f"hostile client, {name}: {outcome}")
