"""Helpers for clients of corral's own framed protocols written by hand (net/step_frames.h:
the agent's step protocol, corrald's rpc protocol of net/rpc_frames.h and its agent stream
of net/agent_frames.h), as source text:
tests prepend FRAME_HELPERS to a script they run as another user with `python3 -c`."""

FRAME_HELPERS = r'''
import socket, struct, sys, time

def frame(kind, payload):
    return bytes([kind]) + struct.pack(">I", len(payload)) + payload

def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out

def field(num, payload):  # a length-delimited protobuf field
    return varint(num << 3 | 2) + varint(len(payload)) + payload

def read_answer(s):
    """Frames up to the status frame: ("CODE MESSAGE", the last message frame's payload),
    or ("closed", b"") when the connection ends first."""
    buf, body = b"", b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return "closed", b""
        buf += chunk
        while len(buf) >= 5:
            kind, n = buf[0], struct.unpack(">I", buf[1:5])[0]
            if len(buf) < 5 + n:
                break
            payload, buf = buf[5:5 + n], buf[5 + n:]
            if kind == 1:
                body = payload
            elif kind == 2:
                return f"{payload[0]} {payload[1:].decode()}", body

def exchange(path, preface, data):
    """Connects to `path`, sends `preface` and `data`, and reads up to the status frame."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.send(preface + data)
    return read_answer(s)
'''
