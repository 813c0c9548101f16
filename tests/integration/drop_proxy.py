#!/usr/bin/python3
"""drop_proxy.py LISTEN_PORT TARGET_PORT MARKER SECONDS: a TCP relay on
loopback to TARGET_PORT that, for SECONDS after it starts, closes any client
connection whose next bytes contain MARKER instead of passing them on: the
control endpoint vanishing at one exact request (chaos_found_test.sh).
Prints "ready" once it listens, and "dropped N" lines as it drops."""
import socket, sys, threading, time

port, target, marker, window = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode(), float(sys.argv[4])
t0, dropped = time.time(), 0


def pipe(src, dst, inspect):
    global dropped
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            if inspect and marker in b and time.time() - t0 < window:
                dropped += 1
                print("dropped %d" % dropped, flush=True)
                break
            dst.sendall(b)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(64)
print("ready", flush=True)
while True:
    c, _ = ls.accept()
    try:
        s = socket.create_connection(("127.0.0.1", target))
    except OSError:
        c.close()
        continue
    threading.Thread(target=pipe, args=(c, s, True), daemon=True).start()
    threading.Thread(target=pipe, args=(s, c, False), daemon=True).start()
