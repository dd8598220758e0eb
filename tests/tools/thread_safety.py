#!/usr/bin/env python3
"""Compiles the sources under the given folders with clang's thread-safety analysis and
fails on any finding (src/util/thread_annotations.h says what is checked).

Usage: thread_safety.py BUILD_DIR/compile_commands.json SOURCE_DIR FOLDER...
The build's own compile commands are reused with clang++ and -fsyntax-only, so nothing is
written; only the thread-safety warnings are enabled, as errors.
"""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys


def clang_command(entry, clang):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    while args and os.path.basename(args[0]) in ("ccache", "sccache"):
        args = args[1:]
    out = [clang]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MT", "-MF", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith("-W") or a == "-w":
            continue
        out.append(a)
    return out + ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    db_path, source_dir, folders = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3:]
    clang = shutil.which("clang++")
    if clang is None:
        sys.exit("clang++ is not installed: scripts/install-deps.sh installs it (Debian package clang)")
    with open(db_path) as f:
        entries = json.load(f)
    wanted = [os.path.join(source_dir, d.rstrip("/")) + "/" for d in folders]
    todo = [e for e in entries if any(os.path.realpath(e["file"]).startswith(w) for w in wanted)]
    if not todo:
        sys.exit(f"no sources under {', '.join(folders)} in {db_path}")

    def check(e):
        r = subprocess.run(clang_command(e, clang), cwd=e["directory"], capture_output=True, text=True)
        return e["file"], r.returncode, r.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for path, rc, err in pool.map(check, todo):
            if rc != 0:
                failed += 1
                print(f"--- {os.path.relpath(path, source_dir)}\n{err}")
    print(f"{len(todo)} file(s) checked, {failed} with thread-safety findings")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
