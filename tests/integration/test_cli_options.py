"""The command line refuses bad options and values before anything is sent: each case exits
non-zero with a message naming the problem, and the queue stays empty."""
import json
import os
import textwrap

import pytest

# (arguments after `corral submit`, text the error must contain)
BAD_JOB_OPTIONS = [
    (["-N", "abc", "true"], "-N/--nodes: expected a positive integer, got 'abc'"),
    (["-N", "0", "true"], "-N/--nodes"),
    (["-n", "-3", "true"], "-n/--ntasks"),
    (["-c", "x", "true"], "-c/--cpus-per-task"),
    (["--gpus-per-task", "many", "true"], "--gpus-per-task"),
    (["-t", "1x", "true"], "-t/--time: invalid value '1x'"),
    (["--mem", "10Q", "true"], "--mem: invalid value '10Q'"),
    (["-d", "afterok:xyz", "true"], "-d/--dependency"),
    (["--begin", "garbage", "true"], "--begin: cannot understand 'garbage'"),
    (["-w", "n[1-", "true"], "-w/--nodelist"),
    (["-x", "n[1-", "true"], "-x/--exclude"),
    (["--urgency", "99", "true"], "--urgency"),
    (["--export", "1X=2", "true"], "--export"),
    (["--setopt", "=v", "true"], "--setopt"),
    (["--cc", "a-b", "true"], "--cc"),
    (["--test-run-duration", "soon", "true"], "--test-run-duration"),
    (["--no-such-option", "true"], "unknown option '--no-such-option'"),
    (["-N"], "--nodes"),
    ([], "missing COMMAND"),
    (["-N", "2", "-n", "1", "true"], "every node needs at least one task"),
]


def queue_json(cluster):
    proc = cluster.corral("queue", "--all", "--json")
    return json.loads(proc.stdout)


def check_refused(proc, command, expect):
    assert proc.returncode == 2, (command, proc.returncode, proc.stdout, proc.stderr)
    assert f"corral {command}:" in proc.stderr, proc.stderr
    assert expect in proc.stderr, proc.stderr
    assert proc.stdout == "", proc.stdout


@pytest.mark.cluster(size=2)
def test_bad_job_options_submit_nothing(cluster):
    for command in ("submit", "run"):
        for args, expect in BAD_JOB_OPTIONS:
            check_refused(cluster.corral(command, *args, check=False), command, expect)
    assert queue_json(cluster) == []


def write_script(tmp_path, text, name="script.sh"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.cluster(size=2)
def test_bad_batch_scripts_submit_nothing(cluster, tmp_path):
    no_shebang = write_script(tmp_path, "#CORRAL -N 1\nhostname\n", "plain.sh")
    proc = cluster.corral("batch", no_shebang, check=False)
    check_refused(proc, "batch", "#!")

    bad = write_script(tmp_path, """\
        #!/bin/sh
        # a comment
        #CORRAL --nodes=x
        hostname
        """)
    proc = cluster.corral("batch", bad, check=False)
    check_refused(proc, "batch", f"{bad}:3: #CORRAL --nodes=x: -N/--nodes")

    unknown = write_script(tmp_path, "#!/bin/sh\n#CORRAL --frobnicate\ntrue\n", "unknown.sh")
    proc = cluster.corral("batch", unknown, check=False)
    check_refused(proc, "batch", f"{unknown}:2: #CORRAL --frobnicate")

    quote = write_script(tmp_path, "#!/bin/sh\n#CORRAL -J 'open\ntrue\n", "quote.sh")
    check_refused(cluster.corral("batch", quote, check=False), "batch", "quote")

    proc = cluster.corral("batch", tmp_path / "missing.sh", check=False)
    assert proc.returncode != 0 and "missing.sh" in proc.stderr

    proc = cluster.corral("batch", "-", input="echo no shebang\n", check=False)
    check_refused(proc, "batch", "(stdin):1:")
    assert queue_json(cluster) == []


@pytest.mark.cluster(size=2)
def test_bad_values_of_other_commands(cluster):
    cases = [
        (["queue", "-t", "bogus"], "queue", "bogus"),
        (["queue", "-u", "no-such-user-xyz"], "queue", "no-such-user-xyz"),
        (["queue", "-j", "x"], "queue", "'x' is not a job id"),
        (["cancel"], "cancel", "no jobs given"),
        (["cancel", "-s", "NOPE", "1"], "cancel", "unknown signal 'NOPE'"),
        (["cancel", "abc"], "cancel", "'abc' is not a job or step id"),
        (["show", "job", "x"], "show job", "not a job id"),
        (["eventlog", "0"], "eventlog", "not a job id"),
        (["wait", "1,y"], "wait", "'y' is not a job id"),
        (["nodes", "-s", "sleepy"], "nodes", "unknown node state 'sleepy'"),
        (["nodes", "node[0-"], "nodes", "invalid hostlist"),
        (["drain", "node0"], "drain", "--reason is required"),
        (["drain", "node[", "--reason", "x"], "drain", "invalid hostlist"),
    ]
    for args, command, expect in cases:
        check_refused(cluster.corral(*args, check=False), command, expect)
    assert queue_json(cluster) == []


@pytest.mark.cluster(size=2)
def test_unknown_job_is_an_error(cluster):
    for args in (["show", "job", "999"], ["eventlog", "999"], ["wait", "999"]):
        proc = cluster.corral(*args, check=False)
        assert proc.returncode == 1, (args, proc.stderr)
        assert "999" in proc.stderr or "no such job" in proc.stderr.lower(), proc.stderr


def test_unreachable_controller_is_explained(corral, tmp_path):
    uri = f"unix:{tmp_path}/nobody.sock"
    proc = corral("--uri", uri, "queue")
    assert proc.returncode == 1
    assert f"cannot reach the controller at {uri}" in proc.stderr
    assert "CORRAL_URI" in proc.stderr
    env = dict(os.environ, CORRAL_URI=uri)
    proc = corral("nodes", env=env)
    assert proc.returncode == 1 and uri in proc.stderr


def test_a_socket_path_too_long_is_explained(corral, tmp_path):
    # gRPC alone says "Failed to create secure client channel".
    uri = "unix:/tmp/" + "x" * 120 + "/corrald.sock"
    proc = corral("--uri", uri, "queue")
    assert proc.returncode == 1
    assert f"cannot reach the controller at {uri}: the socket path is 138 bytes long" in proc.stderr, proc.stderr
    assert "secure client channel" not in proc.stderr, proc.stderr
    proc = corral("run", "--jobid=7", "true", env=dict(os.environ, CORRAL_STEPMGR=uri, CORRAL_URI=uri))
    assert proc.returncode != 0 and "longer than a Unix socket address holds" in proc.stderr, proc.stderr


def test_bad_options_need_no_controller(corral, tmp_path):
    # Validation happens before connecting: the error is about the option, not the socket.
    env = dict(os.environ, CORRAL_URI=f"unix:{tmp_path}/nobody.sock")
    proc = corral("submit", "-N", "abc", "true", env=env)
    check_refused(proc, "submit", "-N/--nodes")


def test_directives_and_command_line(corral, tmp_path):
    script = write_script(tmp_path, """\
        #!/bin/bash
        #CORRAL -N 2 -n 4
        #CORRAL --job-name "my job" -t 10
        echo hello
        #CORRAL -N 9
        """)
    proc = corral("batch", "--dry-run", "-N", "4", script)
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(proc.stdout)
    system = spec["attributes"]["system"]
    assert system["job"]["name"] == "my job"
    assert system["duration"] == 600
    assert spec["resources"][0]["count"] == 4  # the command line wins over the directive
    assert system["batch"]["script"].startswith("#!/bin/bash")
    assert system["shell"]["options"]["output"]["stdout"]["path"] == "corral-%j.out"


def test_dry_run_shows_the_jobspec(corral, tmp_path):
    proc = corral("submit", "--dry-run", "-N", "2", "-n", "4", "-t", "30s", "--export",
                  "NONE,X=1", "--setopt", "a.b=3", "--setopt", "flag", "-D", str(tmp_path),
                  "hostname", "-f")
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(proc.stdout)
    system = spec["attributes"]["system"]
    assert spec["tasks"][0]["command"] == ["hostname", "-f"]
    assert system["duration"] == 30
    assert system["environment"] == {"X": "1"}
    assert system["cwd"] == str(tmp_path)
    assert system["shell"]["options"]["a"] == {"b": 3}
    assert system["shell"]["options"]["flag"] is True
    run = corral("run", "--dry-run", "-l", "--", "ls", "-l")
    assert json.loads(run.stdout)["tasks"][0]["command"] == ["ls", "-l"]
    assert "output" not in json.loads(run.stdout)["attributes"]["system"].get("shell", {}).get(
        "options", {})


def test_help_explains(corral):
    top = corral("--help")
    assert top.returncode == 0
    for sub in ("start", "submit", "run", "batch", "queue", "cancel", "show", "eventlog",
                "wait", "nodes", "drain", "resume", "hostlist"):
        assert sub in top.stdout
    sub = corral("submit", "--help")
    assert sub.returncode == 0
    for opt in ("--nodes", "--ntasks", "--cpus-per-task", "--gpus-per-task", "--time",
                "--job-name", "--output", "--error", "--nodelist", "--exclude", "--partition",
                "--exclusive", "--dependency", "--begin", "--export", "--setopt"):
        assert opt in sub.stdout, opt
    proc = corral("frobnicate")
    assert proc.returncode == 2 and "frobnicate" in proc.stderr


def test_hostlist_basics(corral):
    def out(*args):
        proc = corral("hostlist", *args)
        assert proc.returncode == 0, (args, proc.stderr)
        return proc.stdout.strip()

    assert out("expand", "node[1-3]").split() == ["node1", "node2", "node3"]
    assert out("compress", "node1,node2,node3,node7") == "node[1-3,7]"
    assert out("count", "node[0-9],login1") == "11"
    assert out("nth", "1", "node[4-6]") == "node5"
    assert out("uniq", "n3,n1,n3,n2") == "n[1-3]"
    assert out("minus", "n[1-5]", "n[2-3]") == "n[1,4-5]"
    bad = corral("hostlist", "expand", "node[1-")
    assert bad.returncode != 0 and "corral hostlist" in bad.stderr
