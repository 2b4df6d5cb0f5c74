"""Host names of a job's nodes in libparanic_sock.so (userlib/sock/sock_names.c,
docs/sockets.md "Host names"): under LD_PRELOAD a process of node N is called
pn-node<N>, pn-node<M> resolves to node M's cluster address and back, through every
resolver call programs use (checked from Python: socket module for gethostname,
getaddrinfo, gethostbyname_ex/_r, gethostbyaddr_r, getnameinfo, os.uname; ctypes on the
global symbol table for gethostbyname, gethostbyname2 and gethostbyaddr as pvmd calls
them). Other names, and processes outside a job, get libc's answers. No cluster is
needed: the names do not open the socket port."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from paranic.launch import USERLIB_BUILD, clean_env

SOCK_SO = USERLIB_BUILD / "libparanic_sock.so"

PROBE = r"""
import ctypes, json, os, socket, sys

class HostEnt(ctypes.Structure):
    _fields_ = [("h_name", ctypes.c_char_p), ("h_aliases", ctypes.POINTER(ctypes.c_char_p)),
                ("h_addrtype", ctypes.c_int), ("h_length", ctypes.c_int),
                ("h_addr_list", ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte)))]

g = ctypes.CDLL(None)   # the global scope: the preloaded library comes first, as for pvmd
for f in ("gethostbyname", "gethostbyname2", "gethostbyaddr"):
    getattr(g, f).restype = ctypes.POINTER(HostEnt)
g.gethostbyname.argtypes = [ctypes.c_char_p]
g.gethostbyname2.argtypes = [ctypes.c_char_p, ctypes.c_int]
g.gethostbyaddr.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]

def hent(p):
    if not p:
        return None
    h = p.contents
    addrs, i = [], 0
    while h.h_addr_list[i]:
        addrs.append(".".join(str(h.h_addr_list[i][k]) for k in range(h.h_length)))
        i += 1
    return [h.h_name.decode(), h.h_addrtype, addrs, h.h_aliases[0]]

def tryc(f, *a, fail="error"):
    try:
        return f(*a)
    except OSError:
        return fail

names = sys.argv[1:]
out = {
    "gethostname": socket.gethostname(),
    "uname": os.uname().nodename,
    "c_gethostbyname": {n: hent(g.gethostbyname(n.encode())) for n in names},
    "c_gethostbyname2_inet6": hent(g.gethostbyname2(names[0].encode(), socket.AF_INET6)),
    "py_gethostbyname": {n: tryc(socket.gethostbyname, n) for n in names},
    "py_gethostbyname_ex": {n: tryc(socket.gethostbyname_ex, n) for n in names},
    "getaddrinfo": [[ai[0], ai[1], ai[3], ai[4][0], ai[4][1]] for ai in
                    tryc(socket.getaddrinfo, names[0], "ssh", socket.AF_INET, socket.SOCK_STREAM, 0,
                         socket.AI_CANONNAME, fail=[])],
    "getaddrinfo_any": sorted({ai[4][0] for ai in tryc(socket.getaddrinfo, names[0], 80, fail=[])}),
}
addrs = [a for a in sys.stdin.read().split()]
out["c_gethostbyaddr"] = {a: hent(g.gethostbyaddr(socket.inet_aton(a), 4, socket.AF_INET)) for a in addrs}
out["py_gethostbyaddr"] = {a: tryc(socket.gethostbyaddr, a) for a in addrs}
out["getnameinfo"] = {a: [tryc(socket.getnameinfo, (a, 22), 0), tryc(socket.getnameinfo, (a, 22), socket.NI_NUMERICHOST)]
                      for a in addrs}
print(json.dumps(out))
"""


def probe(env: dict[str, str], names: list[str], addrs: list[str]) -> dict:
    e = clean_env()
    e.update(env)
    e["LD_PRELOAD"] = str(SOCK_SO)
    r = subprocess.run([sys.executable, "-c", PROBE, *names], input=" ".join(addrs), capture_output=True, text=True,
                       env=e, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_node_has_its_name_and_finds_the_others(userlib_build):
    d = probe({"PARANIC_NODE": "1", "PARANIC_NODES": "3"},
              ["pn-node2", "PN-NODE0", "pn-node1.", "pn-node3", "pn-node01", "pn-node", "pn-node1x", "localhost"],
              ["10.77.0.1", "10.77.0.3", "10.77.0.4", "127.0.0.1"])
    assert d["gethostname"] == "pn-node1" and d["uname"] == "pn-node1"
    ent = d["c_gethostbyname"]
    assert ent["pn-node2"] == ["pn-node2", socket.AF_INET, ["10.77.0.3"], None]
    assert ent["PN-NODE0"] == ["pn-node0", socket.AF_INET, ["10.77.0.1"], None]   # case-insensitive
    assert ent["pn-node1."][2] == ["10.77.0.2"]                                    # a trailing dot
    for bad in ("pn-node3", "pn-node01", "pn-node", "pn-node1x"):                  # beyond the job, not a node
        assert ent[bad] is None and d["py_gethostbyname"][bad] == "error", bad
    assert "127.0.0.1" in ent["localhost"][2]                                     # other names: libc
    assert d["c_gethostbyname2_inet6"] is None or d["c_gethostbyname2_inet6"][1] == socket.AF_INET6
    assert d["py_gethostbyname"]["pn-node2"] == "10.77.0.3"
    assert d["py_gethostbyname_ex"]["pn-node2"] == ["pn-node2", [], ["10.77.0.3"]]
    assert d["getaddrinfo"] == [[socket.AF_INET, socket.SOCK_STREAM, "pn-node2", "10.77.0.3", 22]]
    assert d["getaddrinfo_any"] == ["10.77.0.3"]
    rev = d["c_gethostbyaddr"]
    assert rev["10.77.0.1"][0] == "pn-node0" and rev["10.77.0.3"][0] == "pn-node2"
    assert rev["10.77.0.4"] is None or rev["10.77.0.4"][0] != "pn-node3"          # no node 3 in this job
    assert d["py_gethostbyaddr"]["10.77.0.3"] == ["pn-node2", [], ["10.77.0.3"]]
    assert d["getnameinfo"]["10.77.0.1"] == [["pn-node0", "ssh"], ["10.77.0.1", "ssh"]]
    assert d["getnameinfo"]["127.0.0.1"][0] != "error" and "pn-node" not in d["getnameinfo"]["127.0.0.1"][0][0]


def test_prefix_and_network_are_settings(userlib_build):
    d = probe({"PARANIC_NODE": "0", "PARANIC_NODES": "2", "PARANIC_SOCK_HOSTNAME": "sim-",
               "PARANIC_SOCK_NET": "192.168.7.0/24", "PARANIC_SOCK": "0"},   # names stay with the OS's sockets
              ["sim-1", "pn-node1"], ["192.168.7.2"])
    assert d["gethostname"] == "sim-0"
    assert d["c_gethostbyname"]["sim-1"][2] == ["192.168.7.2"]
    assert d["c_gethostbyname"]["pn-node1"] is None
    assert d["c_gethostbyaddr"]["192.168.7.2"][0] == "sim-1"


@pytest.mark.parametrize("env", [{}, {"PARANIC_NODE": "0", "PARANIC_NODES": "2", "PARANIC_SOCK_HOSTNAME": ""}],
                         ids=["outside-a-job", "names-off"])
def test_otherwise_the_machines_names(userlib_build, env):
    d = probe(env, ["pn-node1"], ["10.77.0.2"])
    assert d["gethostname"] == socket.gethostname() and d["uname"] == socket.gethostname()
    assert d["c_gethostbyname"]["pn-node1"] is None and d["getaddrinfo_any"] == []
    assert d["c_gethostbyaddr"]["10.77.0.2"] is None or d["c_gethostbyaddr"]["10.77.0.2"][0] != "pn-node1"
