"""Random spec 2 configs for a differential run against the MCO (see README.md).

Usage: fuzz.py SEED COUNT [mixed|valid] > cases.json
"mixed" draws many invalid values (most configs are refused somewhere); "valid" mostly
valid ones (more configs convert, more reach the converter's checks).
"""
import json, random, sys
seed=int(sys.argv[1]); n=int(sys.argv[2]); profile=sys.argv[3] if len(sys.argv) > 3 else "mixed"
R=random.Random(seed)
def ch(*xs): return R.choice(xs)
def maybe(p=0.5): return R.random()<p
if profile == "valid":
    PATHS=["/etc/a","/etc/b","/etc/a/","/etc//b","/l","/l/x","/lx","/d","/d/e","/etc/systemd/system/a.service"]
    SRCS=["data:,x","data:,hello%20world","data:;base64,aGVsbG8=","https://example.com/x","","s3://b/k","tftp://h/f","oem:///x"]
    UNITS=["a.service","b.timer","t@.service","t@x.service","x.socket"]
    CONTENTS=["[Unit]\nA=b\n","[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=x\n","","# c\n"]
    DROPS=["10.conf","20.conf"]
    FS=["root","root","root","root","var"]
    MODES=(420,384,493,0,1517)
    DIRMODES=(493,1023)
    VERSIONS=("2.2.0","2.2.0","2.2.0","2.2.0","2.1.0","2.0.0")
    USERS=("core","core","core","core","bob")
else:
    PATHS=["/etc/a","/etc/b","/etc/a/","/etc//b","/l","/l/x","/lx","/etc/systemd/system/a.service","/etc/systemd/system/a.service.d/x.conf","rel","/d","/d/e",""]
    SRCS=["data:,x","data:,hello%20world","data:;base64,aGVsbG8=","data:;base64,!!","https://example.com/x","oem:///x","ftp://x","","data:,100%","http://h:p/","s3://b/k?versionId=","tftp://h/f","DATA:,x"]
    UNITS=["a.service","b.timer","t@.service","t@x.service","bad","x.socket"]
    CONTENTS=["[Unit]\nA=b\n","[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=x\n","","[Unit","[Unit] x\n","# c\n","[Unit]\nNoEq\n"]
    DROPS=["10.conf","20.conf","bad"]
    FS=["root","root","root","var",""]
    MODES=(420,384,493,0,1517,4095,4096,-1)
    DIRMODES=(493,1023,70000)
    VERSIONS=("2.2.0","2.2.0","2.2.0","2.2.0","2.1.0","2.0.0","2.3.0")
    USERS=("core","core","core","bob")
def node(kind):
    d={"path":ch(*PATHS)}
    if maybe(0.9): d["filesystem"]=ch(*FS)
    if maybe(0.2): d["user"]=ch({"id":0},{"name":"core"},{"id":1,"name":"x"},{})
    if maybe(0.2): d["group"]=ch({"id":0},{"name":"wheel"},{"id":1,"name":"x"})
    if maybe(0.2): d["overwrite"]=ch(True,False)
    return d
def file():
    d=node("file")
    if maybe(0.85): d["mode"]=ch(*MODES)
    if maybe(0.8):
        c={"source":ch(*SRCS)}
        if maybe(0.2): c["compression"]=ch("gzip","","xz")
        if maybe(0.2): c["verification"]=ch({},{"hash":"sha512-"+"0"*128},{"hash":"sha256-0"},{"hash":"x"})
        d["contents"]=c
    if maybe(0.15): d["append"]=True
    if maybe(0.05): d[ch("Mode","extra","Path")]=1
    return d
def unit():
    d={"name":ch(*UNITS)}
    if maybe(0.6): d["contents"]=ch(*CONTENTS)
    if maybe(0.3): d["enable"]=ch(True,False)
    if maybe(0.3): d["enabled"]=ch(True,False)
    if maybe(0.1): d["mask"]=True
    if maybe(0.4): d["dropins"]=[{"name":ch(*DROPS),**({"contents":ch(*CONTENTS)} if maybe() else {})} for _ in range(R.randint(0,2))]
    return d
def cfg():
    v=ch(*VERSIONS)
    c={"ignition":{"version":v}}
    st={}
    if maybe(0.8): st["files"]=[file() for _ in range(R.randint(0,4))]
    if maybe(0.3): st["directories"]=[dict(node("dir"),**({"mode":ch(*DIRMODES)} if maybe() else {})) for _ in range(R.randint(0,2))]
    if maybe(0.3): st["links"]=[dict(node("link"),target=ch("/d","x","/etc/a",""),**({"hard":True} if maybe(0.3) else {})) for _ in range(R.randint(0,2))]
    if maybe(0.1): st["filesystems"]=[ch({"name":"root","path":"/"},{"name":"var","mount":{"device":"/dev/sdb","format":"xfs"}},{"name":"x"})]
    if maybe(0.1): st["disks"]=[ch({"device":"/dev/sdb"},{"device":"/dev//sdb","wipeTable":True},{"device":"/dev/sdc","partitions":[{"number":1}]},{"device":""})]
    if maybe(0.1): st["raid"]=[ch({"name":"m","level":"raid1","devices":["/dev/a"]},{"name":"m","level":"raid0","spares":1,"devices":["/dev/a"]},{"name":"n","level":"1"},{"name":"o","level":"bogus","devices":["rel"]})]
    if st: c["storage"]=st
    if maybe(0.6): c["systemd"]={"units":[unit() for _ in range(R.randint(0,4))]}
    if maybe(0.4):
        users=[{"name":ch(*USERS),**({"sshAuthorizedKeys":[ch("k1","k2","k3") for _ in range(R.randint(0,3))]} if maybe(0.8) else {}),**({"passwordHash":ch("h","")} if maybe(0.3) else {}),**({"create":{}} if maybe(0.1) else {}),**({"groups":["a","a"]} if maybe(0.05) else {})} for _ in range(R.randint(0,3))]
        c["passwd"]={"users":users}
        if maybe(0.2): c["passwd"]["groups"]=[{"name":ch("g","h")} for _ in range(R.randint(1,2))]
    if maybe(0.05): c["networkd"]={"units":[{"name":"a.network","contents":"[Match]\n"}]}
    if maybe(0.1): c["ignition"]["config"]={"append":[{"source":ch(*SRCS)} for _ in range(R.randint(0,2))]}
    if maybe(0.05): c["ignition"]["security"]={"tls":{"certificateAuthorities":[{"source":ch(*SRCS)}]}}
    if maybe(0.05): c["ignition"]["timeouts"]={"httpTotal":ch(1,"x")}
    return c
print(json.dumps([{"name":f"fuzz{seed}_{i}","input":cfg()} for i in range(n)]))
