"""Bad input is refused with a message naming what is wrong, and changes nothing: malformed
jobspec files (`corral submit --jobspec`), bad and unknown hostlists, unknown partitions,
requests no node could ever satisfy, and `corral hostlist` errors."""
import json
import os
import subprocess
import textwrap

import pytest

from conftest import binary

# The cluster: four nodes of 4 cores, 16 GiB, no GPUs.
pytestmark = pytest.mark.cluster(size=4, agents=2, cores=4)


def good_jobspec(command=("true",), count=1, cores=1):
    return {
        "version": 1,
        "resources": [{"type": "slot", "count": count, "label": "task",
                       "with": [{"type": "core", "count": cores}]}],
        "tasks": [{"command": list(command), "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 0}},
    }


def with_change(change):
    spec = good_jobspec()
    change(spec)
    return spec


def set_in(path, value):
    def change(spec):
        obj = spec
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return change


def drop(key):
    return lambda spec: spec.pop(key)


# (jobspec document, text the error must contain)
BAD_JOBSPECS = [
    (with_change(set_in(["resources", 0, "count"], 0)), "resources[0].count"),
    (with_change(set_in(["resources", 0, "count"], -2)), "resources[0].count"),
    (with_change(set_in(["resources", 0, "count"], "two")), "resources[0].count"),
    (with_change(set_in(["resources", 0, "with", 0, "count"], 0)),
     "resources[0].with[0].count"),
    (with_change(set_in(["resources", 0, "with", 0, "type"], "memory")),
     "resources[0].with[0].type"),
    (with_change(set_in(["resources", 0, "type"], "rack")), "resources[0].type"),
    (with_change(set_in(["version"], 2)), "version"),
    (with_change(drop("version")), "version"),
    (with_change(drop("tasks")), "tasks"),
    (with_change(drop("resources")), "resources"),
    (with_change(set_in(["tasks", 0, "command"], [])), "tasks[0].command"),
    (with_change(set_in(["attributes", "system", "duration"], -5)),
     "attributes.system.duration"),
    (with_change(set_in(["frobnicate"], 1)), "frobnicate"),
]


def queue_ids(cluster):
    return [j["id"] for j in cluster.jobs()]


def check_refused(proc, command, *words, code=2):
    assert proc.returncode == code, (command, proc.returncode, proc.stdout, proc.stderr)
    assert f"corral {command}:" in proc.stderr, proc.stderr
    for w in words:
        assert w in proc.stderr, proc.stderr
    assert proc.stdout == "", proc.stdout


def test_jobspec_files_are_submitted_and_checked(cluster, tmp_path):
    out = cluster.shared_dir()
    # A good JSON jobspec, and the same as YAML, run.
    spec = good_jobspec(["sh", "-c", f"echo json >> {out}/json-$CORRAL_JOBID"], count=2)
    path = tmp_path / "good.json"
    path.write_text(json.dumps(spec))
    job = int(cluster.corral("submit", "--jobspec", path).stdout)
    info = cluster.wait_job(job)
    assert info["result"] == "COMPLETED" and info["ntasks"] == 2, info
    assert (out / f"json-{job}").read_text() == "json\njson\n"

    yaml_path = tmp_path / "good.yaml"
    yaml_path.write_text(textwrap.dedent(f"""\
        version: 1
        resources:
          - type: node
            count: 2
            with:
              - type: slot
                count: 1
                label: task
                with:
                  - type: core
                    count: 2
        tasks:
          - command: ["sh", "-c", "echo $CORRAL_NODENAME > {out}/yaml-$CORRAL_JOBID-$CORRAL_NODENAME"]
            slot: task
            count:
              per_slot: 1
        attributes:
          system:
            duration: 60
        """))
    job = int(cluster.corral("submit", "--jobspec", yaml_path).stdout)
    info = cluster.wait_job(job)
    assert info["result"] == "COMPLETED" and info["nnodes"] == 2 and info["ncores"] == 4, info
    assert len(list(out.glob(f"yaml-{job}-*"))) == 2
    # From stdin, with --urgency.
    proc = cluster.corral("submit", "--jobspec", "-", "--urgency", "3",
                          input=json.dumps(good_jobspec()))
    job = int(proc.stdout)
    info = cluster.wait_job(job)
    assert info["urgency"] == 3 and info["result"] == "COMPLETED", info
    # --dry-run shows the document and submits nothing.
    before = queue_ids(cluster)
    proc = cluster.corral("submit", "--dry-run", "--jobspec", yaml_path)
    assert json.loads(proc.stdout)["resources"][0]["type"] == "node"
    assert queue_ids(cluster) == before


def test_malformed_jobspecs_name_the_bad_field(cluster, tmp_path):
    for i, (doc, expect) in enumerate(BAD_JOBSPECS):
        path = tmp_path / f"bad{i}.json"
        path.write_text(json.dumps(doc))
        proc = cluster.corral("submit", "--jobspec", path, check=False)
        check_refused(proc, "submit", f"{path}: ", expect)
        # The YAML form of the same document is refused for the same reason.
        ypath = tmp_path / f"bad{i}.yaml"
        # JSON values are YAML flow nodes, so "key: <json>" lines make a YAML document.
        ydoc = "\n".join(f"{k}: {json.dumps(v)}" for k, v in doc.items())
        ypath.write_text(ydoc + "\n")
        proc = cluster.corral("submit", "--jobspec", ypath, check=False)
        check_refused(proc, "submit", expect)

    syntax = tmp_path / "syntax.json"
    syntax.write_text('{"version": 1, "resources": [')
    check_refused(cluster.corral("submit", "--jobspec", syntax, check=False), "submit",
                  str(syntax))
    yaml_syntax = tmp_path / "syntax.yaml"
    yaml_syntax.write_text("version: 1\nresources: [\n  - type: slot\n")
    check_refused(cluster.corral("submit", "--jobspec", yaml_syntax, check=False), "submit",
                  str(yaml_syntax))
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    check_refused(cluster.corral("submit", "--jobspec", empty, check=False), "submit", "empty")
    not_object = tmp_path / "list.yaml"
    not_object.write_text("- 1\n- 2\n")
    check_refused(cluster.corral("submit", "--jobspec", not_object, check=False), "submit",
                  "object")

    missing = tmp_path / "missing.json"
    proc = cluster.corral("submit", "--jobspec", missing, check=False)
    check_refused(proc, "submit", f"cannot read {missing}", code=1)

    good = tmp_path / "good.json"
    good.write_text(json.dumps(good_jobspec()))
    check_refused(cluster.corral("submit", "--jobspec", good, "-N", "2", check=False),
                  "submit", "--jobspec cannot be combined with --nodes")
    check_refused(cluster.corral("submit", "--jobspec", good, "hostname", check=False),
                  "submit", "unexpected COMMAND 'hostname'")
    assert queue_ids(cluster) == []


def test_the_controller_checks_jobspecs_too(cluster):
    # A client that skips validation (or an older one) still cannot store a bad jobspec.
    doc = with_change(set_in(["resources", 0, "count"], 0))
    proc = cluster.corral("submit", "--jobspec", "-", check=False, input=json.dumps(doc))
    assert proc.returncode == 2 and "resources[0].count" in proc.stderr
    assert queue_ids(cluster) == []


# (arguments after `corral submit`, exit code, text the error must contain)
REFUSED_SUBMITS = [
    (["-w", "n[1-", "true"], 2, "-w/--nodelist"),
    (["-x", "node[", "true"], 2, "-x/--exclude"),
    (["-w", "node9", "true"], 1, "requested node node9 does not exist"),
    (["-w", "node[2-5]", "true"], 1, "does not exist"),
    (["-p", "nosuch", "true"], 1, "partition 'nosuch' does not exist"),
    (["-N", "100", "true"], 1, "unsatisfiable"),
    (["-c", "64", "true"], 1, "unsatisfiable"),
    (["-N", "1", "-n", "5", "true"], 1, "unsatisfiable"),
    (["--gpus-per-task", "1", "true"], 1, "unsatisfiable"),
    (["--mem", "1T", "true"], 1, "unsatisfiable"),
    (["-w", "node0", "-x", "node0", "true"], 1, "both requested and excluded"),
]


def test_impossible_requests_are_refused_and_change_nothing(cluster):
    before = [n["state"] for n in cluster.nodes()]
    for command in ("submit", "run"):
        for args, code, expect in REFUSED_SUBMITS:
            proc = cluster.corral(command, *args, check=False)
            assert proc.returncode == code, (command, args, proc.returncode, proc.stderr)
            assert expect in proc.stderr, (command, args, proc.stderr)
            assert f"corral {command}:" in proc.stderr, proc.stderr
            assert proc.stdout == "", (args, proc.stdout)
    assert queue_ids(cluster) == []
    assert [n["state"] for n in cluster.nodes()] == before
    # The messages say what cannot be had.
    proc = cluster.corral("submit", "-N", "100", "true", check=False)
    assert "100" in proc.stderr and "4" in proc.stderr, proc.stderr
    proc = cluster.corral("submit", "-c", "64", "true", check=False)
    assert "64" in proc.stderr, proc.stderr

    # After all that, a good job still gets through (and is the only one).
    job = cluster.submit("-o", f"{cluster.shared_dir()}/o-%j", "true")
    assert cluster.wait_job(job)["result"] == "COMPLETED"
    assert queue_ids(cluster) == [job]


def test_bad_node_names_in_node_commands(cluster):
    cases = [
        (["drain", "n[", "--reason", "x"], 2, "drain", "invalid hostlist"),
        (["drain", "node[1-", "--reason", "x"], 2, "drain", "invalid hostlist"),
        (["resume", "n[", ], 2, "resume", "invalid hostlist"),
        (["drain", "node9", "--reason", "x"], 1, "drain", "no such node: node9"),
        (["drain", "node[3-4]", "--reason", "x"], 1, "drain", "no such node: node4"),
        (["resume", "nodeX"], 1, "resume", "no such node: nodeX"),
        (["nodes", "node[0-"], 2, "nodes", "invalid hostlist"),
        (["show", "node", "node["], 2, "show node", "invalid hostlist"),
        (["show", "node", "node42"], 1, "show node", "node42"),
    ]
    for args, code, command, expect in cases:
        proc = cluster.corral(*args, check=False)
        assert proc.returncode == code, (args, proc.returncode, proc.stderr)
        assert f"corral {command}:" in proc.stderr, (args, proc.stderr)
        assert expect in proc.stderr, (args, proc.stderr)
    # A partly unknown hostlist changes nothing, not even the nodes that exist.
    assert all(n["state"] == "idle" and n["reason"] == "" for n in cluster.nodes())


HOSTLIST_ERRORS = [
    (["expand", "n[1-"], "n[1-"),
    (["count", "node[3-1]"], "node[3-1]"),
    (["compress", "a[1,,2]"], ""),
    (["nth", "7", "n[1-3]"], "7"),
    (["nth", "x-y", "n[1-3]"], ""),
    (["intersect", "n[1-3]"], "at least two"),
    (["minus", "n1"], "at least two"),
    (["uniq", "n[1-2"], ""),
]


def test_hostlist_errors(corral):
    for args, expect in HOSTLIST_ERRORS:
        proc = corral("hostlist", *args)
        assert proc.returncode == 2, (args, proc.returncode, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("corral hostlist"), (args, proc.stderr)
        assert expect in proc.stderr, (args, proc.stderr)
        assert proc.stdout == "", (args, proc.stdout)
    proc = corral("hostlist", "expand", "-", input="n1 n[2-\n")
    assert proc.returncode == 2 and "corral hostlist" in proc.stderr, proc.stderr
    proc = corral("hostlist", "frobnicate", "n1")
    assert proc.returncode == 2, proc.stderr
    # The good ones work.
    assert corral("hostlist", "count", "n[1-3],m7").stdout == "4\n"


def test_a_second_agent_on_a_state_directory_in_use_is_refused(cluster):
    state = os.path.join(cluster.dir, "agent-0")
    proc = subprocess.run([binary("corral-node"), "--controller", cluster.uri,
                           "--nodes", "node9", "--state-dir", state, "--cgroups", "none"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    pid = cluster.agents[0].pid
    assert f"state directory {state} is in use by corral-node pid {pid}" in proc.stderr, proc.stderr
    # The running agent and its nodes are untouched.
    assert all(not n["state"].startswith("down") for n in cluster.nodes())


def test_an_agent_that_cannot_start_says_why_in_its_log_file(cluster):
    # A step socket path longer than a Unix socket address holds (108 bytes): an agent run by
    # systemd with --log-file must say there, not only on a stderr nobody reads, why it stopped.
    state = os.path.join(cluster.dir, "x" * 100)
    log = os.path.join(cluster.dir, "long.log")
    proc = subprocess.run([binary("corral-node"), "--controller", cluster.uri, "--nodes", "node9",
                           "--state-dir", state, "--cgroups", "none", "--log-file", log],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert "is longer than" in proc.stderr, proc.stderr
    text = open(log).read()
    assert "cannot start: --listen: " in text and "is longer than" in text, text
