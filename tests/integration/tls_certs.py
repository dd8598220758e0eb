"""A site CA and host certificates for TLS tests, made with openssl as docs/install.md
says (EC keys: quick to make)."""
import os
import subprocess

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def make_ca(d, name):
    """(key, certificate) of a new CA in directory d; the certificate readable by all."""
    key, pem = os.path.join(d, f"{name}.key"), os.path.join(d, f"{name}.pem")
    subprocess.run(["openssl", "req", "-x509", *EC, "-keyout", key, "-out", pem, "-days", "1",
                    "-subj", f"/CN={name}"], check=True, capture_output=True)
    os.chmod(pem, 0o644)
    return key, pem


def make_cert(d, ca, name, names=("localhost", "IP:127.0.0.1")):
    """(key, certificate) for `names` (DNS names, or IP:ADDR), signed by `ca`."""
    key, csr, pem, ext = (os.path.join(d, f"{name}.{e}") for e in ("key", "csr", "pem", "ext"))
    with open(ext, "w") as f:
        f.write("subjectAltName=" + ",".join(n if n.startswith("IP:") else f"DNS:{n}" for n in names) + "\n")
    subprocess.run(["openssl", "req", *EC, "-keyout", key, "-out", csr, "-subj", f"/CN={name}"], check=True,
                   capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
                    "-out", pem, "-days", "1", "-extfile", ext], check=True, capture_output=True)
    return key, pem
